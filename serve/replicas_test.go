package serve_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pair is two servers (replicas a and b) on one PostgreSQL database, with
// one workspace and one key file.
func pair(t *testing.T, o rigOpts) (a, b *rig) {
	t.Helper()
	dsn := pgtest.Shared(t).Migrated(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hello\n"), 0o644)
	o.pg, o.ws, o.keys = dsn, ws, filepath.Join(dir, "keys.json")
	oa, ob := o, o
	oa.replica, ob.replica = "replica-a", "replica-b"
	a = newRig(t, oa)
	b = newRig(t, ob)
	return a, b
}

// TestReplicasApproveOnB: a run started on replica a stops for an
// approval; the approval is listed, streamed and decided on replica b,
// where the run continues to the end; b's event stream, opened before the
// run, shows every event a wrote, then b's own; the runs of both are
// visible on both.
func TestReplicasApproveOnB(t *testing.T) {
	a, b := pair(t, rigOpts{})
	sid := a.newSession(a.alice)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type result struct {
		evs []sseEvent
		err error
	}
	streamed := make(chan result, 1)
	go func() {
		evs, err := b.stream(ctx, b.alice, sid, "", func(e sseEvent) bool {
			return e.typ == "run.completed" && strings.Contains(e.data, `"stop_reason":"completed"`)
		})
		streamed <- result{evs, err}
	}()
	waitStream(t, b, sid)
	run := a.must(202, "POST", "/v1/sessions/"+sid+"/runs", a.alice, map[string]any{"prompt": "update notes"})["run"].(map[string]any)
	b.waitStatus(b.alice, sid, "awaiting_approval")
	// b lists a's pending approval, and shows a's run.
	list := b.must(200, "GET", "/v1/approvals", b.alice, nil)["approvals"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["tool"] != "write_file" {
		t.Fatalf("b lists %v, want a's write_file approval", list)
	}
	got := b.must(200, "GET", "/v1/sessions/"+sid+"/runs/"+run["id"].(string), b.alice, nil)
	if got["status"] != "completed" || got["stop_reason"] != "awaiting_approval" {
		t.Fatalf("b shows a's run as %v", got)
	}
	dec := b.must(202, "POST", "/v1/sessions/"+sid+"/approval", b.alice, map[string]any{"decision": "approve", "note": "ok from b"})
	b.waitStatus(b.alice, sid, "idle")
	res := <-streamed
	if res.err != nil {
		t.Fatal(res.err)
	}
	// The stream equals the stored events, a's and b's, in order.
	stored, err := a.stream(ctx, a.alice, sid, "", func(e sseEvent) bool {
		return e.typ == "run.completed" && strings.Contains(e.data, `"stop_reason":"completed"`)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.evs) != len(stored) {
		t.Fatalf("b streamed %d events, the store holds %d", len(res.evs), len(stored))
	}
	for i := range stored {
		if res.evs[i] != stored[i] {
			t.Fatalf("event %d: b streamed %+v, stored %+v", i, res.evs[i], stored[i])
		}
	}
	var types []string
	for _, e := range res.evs {
		types = append(types, e.typ)
	}
	joined := strings.Join(types, " ")
	for _, want := range []string{"approval.required", "approval.resolved", "tool.completed"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("b's stream lacks %s: %s", want, joined)
		}
	}
	msgs := a.must(200, "GET", "/v1/sessions/"+sid+"/messages", a.alice, nil)["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["content"] != "Done: notes.txt updated." {
		t.Fatalf("the run did not complete on b: last message %v", last)
	}
	var by string
	for _, m := range msgs {
		if ap, ok := m.(map[string]any)["approval"].(map[string]any); ok {
			by, _ = ap["by"].(string)
		}
	}
	if by != "alice" {
		t.Fatalf("the approval was recorded as by %q, want alice", by)
	}
	// a sees b's run.
	bRun := dec["run"].(map[string]any)["id"].(string)
	if got := a.must(200, "GET", "/v1/sessions/"+sid+"/runs/"+bRun, a.alice, nil); got["status"] != "completed" || got["kind"] != "approve" {
		t.Fatalf("a shows b's run as %v", got)
	}
	if runs := a.must(200, "GET", "/v1/sessions/"+sid+"/runs", a.alice, nil)["runs"].([]any); len(runs) != 2 {
		t.Fatalf("a lists %d runs of the session, want 2 (a's and b's)", len(runs))
	}
}

// waitStream waits until r has an event stream of sid open.
func waitStream(t *testing.T, r *rig, sid string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.srv.Stats().Streams == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream did not open")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const steerScript = `
steps:
  - text: "Waiting at the gate."
    tool_calls:
      - name: gate
        args: {}
  - match: {role: user, contains: "also check the tests"}
    text: "Steered: checking the tests too."
`

// TestReplicasSteerAndCancel: a steering message posted to replica b
// reaches the run on replica a at its next step boundary; b refuses a
// second prompt while a runs (409 naming a's run), queues one as a
// follow-up on request, which a runs after; and a cancel posted to b
// stops a run on a.
func TestReplicasSteerAndCancel(t *testing.T) {
	gate, gate2 := make(chan struct{}), make(chan struct{})
	started, started2 := make(chan struct{}, 4), make(chan struct{}, 4)
	a, b := pair(t, rigOpts{script: steerScript + "  - text: \"Follow-up done.\"\n  - text: unreachable\n    tool_calls:\n      - name: gate2\n        args: {}\n",
		tools: []kernel.Tool{gateTool("gate", gate, started), gateTool("gate2", gate2, started2)}})
	sid := a.newSession(a.alice)
	run := a.must(202, "POST", "/v1/sessions/"+sid+"/runs", a.alice, map[string]any{"prompt": "wait"})["run"].(map[string]any)
	<-started
	busy := b.must(409, "POST", "/v1/sessions/"+sid+"/runs", b.alice, map[string]any{"prompt": "again"})
	if !strings.Contains(busy["error"].(map[string]any)["message"].(string), run["id"].(string)) {
		t.Fatalf("b's 409 does not name a's run: %v", busy)
	}
	q := b.must(202, "POST", "/v1/sessions/"+sid+"/messages", b.alice, map[string]any{"text": "also check the tests", "kind": "steer"})["queued"].(map[string]any)
	if q["run"] != run["id"] {
		t.Fatalf("b queued the steer for run %v, want a's %v", q["run"], run["id"])
	}
	b.must(202, "POST", "/v1/sessions/"+sid+"/runs", b.alice, map[string]any{"prompt": "and then this", "if_busy": "queue"})
	close(gate)
	b.waitStatus(b.alice, sid, "idle")
	// The follow-up ran after (on whichever replica took it).
	deadline := time.Now().Add(30 * time.Second)
	var texts []string
	for {
		msgs := b.must(200, "GET", "/v1/sessions/"+sid+"/messages", b.alice, nil)["messages"].([]any)
		texts = texts[:0]
		for _, m := range msgs {
			texts = append(texts, m.(map[string]any)["content"].(string))
		}
		if strings.Contains(strings.Join(texts, "|"), "Follow-up done.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follow-up never ran: %q", texts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"also check the tests", "Steered: checking the tests too.", "and then this", "Follow-up done."} {
		if !strings.Contains(all, want) {
			t.Fatalf("the session lacks %q: %q", want, texts)
		}
	}
	if strings.Index(all, "also check the tests") > strings.Index(all, "and then this") {
		t.Fatalf("the follow-up came before the steer: %q", texts)
	}
	// Its answer is stored before its run ends: wait for the end.
	b.waitStatus(b.alice, sid, "idle")

	// Cancel across replicas: a run on a (at the gate again), cancelled
	// through b.
	// The replica that ran the follow-up frees the session's slot just
	// after the run's end is stored: a start may meet it held (409) for
	// that moment, on main before this branch too (1 in 6 runs).
	var run2 map[string]any
	waitFor(t, func() bool {
		p := a.doNoCheck("POST", "/v1/sessions/"+sid+"/runs", a.alice, map[string]any{"prompt": "wait again"})
		if p.status == 409 {
			return false
		}
		if p.status != 202 {
			t.Fatalf("run: %d %s", p.status, p.body)
		}
		run2 = p.json(t)["run"].(map[string]any)
		return true
	})
	<-started2
	waitFor(t, func() bool {
		s := b.must(200, "GET", "/v1/sessions/"+sid, b.alice, nil)
		ar, _ := s["active_run"].(map[string]any)
		return ar != nil && ar["id"] == run2["id"]
	})
	got := b.must(200, "POST", "/v1/sessions/"+sid+"/runs/"+run2["id"].(string)+"/cancel", b.alice, nil)
	if got["status"] != "cancelled" {
		t.Fatalf("the cancel through b answered %v", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStoreDown: with the database gone, the API answers 503 with
// Retry-After (store_unavailable), and /readyz says 503; once the
// database is back, everything answers again.
func TestStoreDown(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		pgtest.Shared(t)
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	r := newRig(t, rigOpts{pg: srv.Migrated(t), replica: "solo"})
	sid := r.newSession(r.alice)
	srv.Kill()
	got := r.do("GET", "/v1/sessions/"+sid, r.alice, nil)
	if got.status != 503 || got.header.Get("Retry-After") == "" || !strings.Contains(string(got.body), "store_unavailable") {
		t.Fatalf("GET a session with the database gone = %d %s (Retry-After %q), want 503 store_unavailable", got.status, got.body, got.header.Get("Retry-After"))
	}
	if got := r.do("GET", "/readyz", "", nil); got.status != 503 {
		t.Fatalf("/readyz with the database gone = %d", got.status)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	r.must(200, "GET", "/v1/sessions/"+sid, r.alice, nil)
	r.must(200, "GET", "/readyz", "", nil)
}
