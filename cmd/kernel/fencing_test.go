package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// The tests of issue 37's guarantees, on real kernel serve processes and
// a real PostgreSQL: a fault armed in one replica (AK_TEST_FAULT,
// faults_test.go) stops or kills it at a named point; the others are
// ordinary replicas.

// waitStopped waits until p is stopped (SIGSTOP) by its own fault.
func waitStopped(t *testing.T, p *replicaProc) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if i := bytes.LastIndexByte(b, ')'); err == nil && i > 0 && len(b) > i+2 && b[i+2] == 'T' {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("replica %s exited instead of stopping:\n%s", p.name, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s never stopped at its fault:\n%s", p.name, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitExited waits until p died (its fault killed it).
func waitExited(t *testing.T, p *replicaProc) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("replica %s never reached its fault:\n%s", p.name, p.stderr.String())
	}
}

// storedEvents reads session sid's whole event log from the database.
func (c *cluster) storedEvents(sid string) []kernel.StoredEvent {
	c.t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, c.dsn, postgres.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	defer s.Close()
	var out []kernel.StoredEvent
	for {
		evs, err := s.ReadEvents(ctx, sid, uint64(len(out)), 1000)
		if err != nil {
			c.t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
	}
}

// resultOf returns the result of the call of tool in msgs, and how many
// results it has.
func resultOf(msgs []map[string]any, tool string) (string, int) {
	var out string
	n := 0
	for _, m := range msgs {
		if m["role"] == "tool" && m["tool_name"] == tool {
			out, _ = m["content"].(string)
			n++
		}
	}
	return out, n
}

const pausedScript = `steps:
  - text: "Writing."
    tool_calls:
      - name: write_file
        args: {path: paused.txt, content: "written by the paused replica\n"}
  - text: "Finished."
`

// TestPausedReplicaSideEffect: replica a is stopped (SIGSTOP) right
// before a side-effecting call runs, after its intent is stored: once
// after the call was approved, once for a call policy allows. Replica b
// takes the session over when a's lease lapses, answers the call, and
// finishes the run. Then a is continued and runs the call late (its
// effect is real: the file appears). The history must not say the call
// did not run: it says it may have run, which is true. a's late run
// writes nothing more, no step and no event.
//
// Without the intent record b answers the call from the file alone (it
// is absent: "did not run"), and the effect that follows makes that a
// lie: the "allowed" case fails on it. Without the approval consumed by
// the intent (Resolve's), the session stays awaiting approval while the
// call runs, and the "approved" case fails: nobody takes it over.
func TestPausedReplicaSideEffect(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	for _, tc := range []struct{ name, policy string }{{"approved", replicaPolicy}, {"allowed", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a cluster of its own
			c := newCluster(t, pausedScript, tc.policy, 2*time.Second)
			a := c.start("a", "AK_TEST_FAULT=tool.run:write_file=stop")
			b := c.start("b")
			sid := c.must(a, 201, "POST", "/v1/sessions", map[string]any{"title": "paused"})["id"].(string)
			run := c.must(a, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "write it"})["run"].(map[string]any)
			if tc.policy != "" {
				c.waitStatus(a, sid, "awaiting_approval", 60*time.Second)
				run = c.must(a, 202, "POST", "/v1/sessions/"+sid+"/approval", map[string]any{"decision": "approve", "note": "go"})["run"].(map[string]any)
			}
			waitStopped(t, a) // the intent is stored; the write has not run
			c.waitStatus(b, sid, "idle", 90*time.Second)
			taken := c.messages(b, sid)
			answer, n := resultOf(taken, "write_file")
			if _, err := os.Stat(c.ws("paused.txt")); err == nil {
				t.Fatal("the file exists while a is stopped before the write")
			}
			a.cmd.Process.Signal(syscall.SIGCONT)
			waitFile(t, c.ws("paused.txt")) // a ran the call late
			deadline := time.Now().Add(60 * time.Second)
			for {
				got := c.must(b, 200, "GET", "/v1/sessions/"+sid+"/runs/"+run["id"].(string), nil)
				if e, _ := got["error"].(string); got["status"] == "failed" && strings.Contains(e, "lease") && !strings.Contains(e, "stopped before") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a's run never reported its refused write: %v\na:\n%s", got, a.stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The invariant: the file was written, so the history must not
			// say the call did not run.
			if n != 1 {
				t.Fatalf("the write has %d results, want 1", n)
			}
			if strings.HasPrefix(answer, kernel.InterruptedNotRun) || !strings.HasPrefix(answer, "interrupted") {
				t.Fatalf("the history says %q of a call that ran (the file was written): want %q", answer, kernel.Interrupted)
			}
			final := c.messages(b, sid)
			samePrefix(t, taken, final)
			if len(final) != len(taken) {
				x, _ := json.Marshal(final[len(taken):])
				t.Fatalf("a wrote after losing its lease: %s", x)
			}
			checkPairs(t, final)
			if last := final[len(final)-1]; last["content"] != "Finished." {
				t.Fatalf("b did not finish the run: %v", last)
			}
			// Events are fenced like steps: nothing of a's follows b's
			// end of the run.
			evs := c.storedEvents(sid)
			end := -1
			for i, e := range evs {
				if e.Type == "run.completed" && strings.Contains(string(e.Data), "Finished.") {
					end = i
				}
			}
			if end < 0 {
				t.Fatalf("no run.completed of b's run among %d events", len(evs))
			}
			for _, e := range evs[end+1:] {
				t.Errorf("event %d (%s) after the end of b's run: %s", e.Seq, e.Type, e.Data)
			}
		})
	}
}

const takeoverScript = "steps:\n  - text: \"At the gate.\"\n    tool_calls:\n" + "%s" + "  - text: \"Finished.\"\n"

// TestTakeoverKilledInModelCall: replica a is killed (SIGKILL) in a tool
// call; replica b takes the session over, answers the call, and is itself
// killed in its first model call (the takeover's). What b left must be a
// session still running (shown interrupted, resumable), never idle with
// an unanswered turn; replica c, started then, resumes it by itself and
// finishes the run. Without the status kept running through the repair,
// b leaves the session idle with a tool result last, which no replica
// resumes and POST …/resume refuses.
func TestTakeoverKilledInModelCall(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	c := newCluster(t, fmt.Sprintf(takeoverScript, gateCall("m")), "", 2*time.Second)
	a := c.start("a")
	sid := c.must(a, 201, "POST", "/v1/sessions", map[string]any{"title": "takeover"})["id"].(string)
	c.must(a, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "wait at the gate"})
	waitFile(t, c.ws("m.started"))
	b := c.start("b", "AK_TEST_FAULT=model.call=kill")
	a.kill()
	waitExited(t, b) // b took over and died in its model call
	ctx := context.Background()
	s, err := postgres.Open(ctx, c.dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	se, err := s.Load(ctx, sid)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	last := se.Messages[len(se.Messages)-1]
	if last.Role != kernel.RoleTool || !strings.HasPrefix(last.Content, "interrupted") {
		t.Fatalf("b died after storing %+v; want its answer to the call in flight (the fault is in the model call)", last)
	}
	if se.Meta.Status != kernel.StatusRunning {
		t.Fatalf("b died in the takeover's model call and left the session %s with a tool result last; want running (interrupted, resumable)", se.Meta.Status)
	}
	cr := c.start("c")
	// Listed as interrupted until c's lease... c resumes it by itself.
	c.waitStatus(cr, sid, "idle", 90*time.Second)
	final := c.messages(cr, sid)
	checkPairs(t, final)
	if got := final[len(final)-1]; got["content"] != "Finished." {
		t.Fatalf("c did not finish the run: %v", got)
	}
	if res, n := callResult(final); n != 1 || !strings.HasPrefix(res, "interrupted") {
		t.Fatalf("the gate call has %d results, %q; want one, interrupted", n, res)
	}
}

const followUpScript = "steps:\n  - text: \"At the gate.\"\n    tool_calls:\n" + "%s" +
	"  - text: \"First answer.\"\n" +
	"  - match: {role: user, contains: \"and then this\"}\n    text: \"Follow-up answer.\"\n"

// TestFollowUpKilledAtEveryStep: a follow-up accepted (202) while a run
// is in flight on replica a; a is killed at each step of taking it: right
// after taking it from the queue, after storing its prompt, after telling
// the queue it is delivered. Replica b carries on, and the follow-up runs
// exactly once: its prompt is in the session once, answered, and nothing
// is left queued. Without the queue keeping a taken follow-up until its
// prompt is stored, a kill after the take loses it; without the session's
// record of it (SessionMeta.Delivered), a kill after the prompt is stored
// runs it twice.
func TestFollowUpKilledAtEveryStep(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	for _, point := range []string{"followup.taken", "followup.stored", "followup.delivered"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel() // a cluster of its own
			c := newCluster(t, fmt.Sprintf(followUpScript, gateCall("q")), "", 2*time.Second)
			a := c.start("a", "AK_TEST_FAULT="+point+"=kill")
			b := c.start("b")
			sid := c.must(a, 201, "POST", "/v1/sessions", map[string]any{"title": "follow-up"})["id"].(string)
			c.must(a, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "wait at the gate"})
			waitFile(t, c.ws("q.started"))
			q := c.must(b, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "and then this", "if_busy": "queue"})["queued"].(map[string]any)
			if q["kind"] != "followup" {
				t.Fatalf("queued %v, want a follow-up", q)
			}
			os.WriteFile(c.ws("q.open"), nil, 0o644)
			waitExited(t, a)
			deadline := time.Now().Add(90 * time.Second)
			var final []map[string]any
			for {
				s := c.must(b, 200, "GET", "/v1/sessions/"+sid, nil)
				final = c.messages(b, sid)
				if n := prompts(final, "and then this"); n > 1 {
					t.Fatalf("the follow-up's prompt is in the session %d times: it ran more than once", n)
				}
				if s["status"] == "idle" && s["active_run"] == nil && len(final) > 0 && final[len(final)-1]["content"] == "Follow-up answer." {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the follow-up never ran to its answer on b: status %v, last %v\nb:\n%s", s["status"], final[len(final)-1], b.stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			checkPairs(t, final)
			if n := prompts(final, "and then this"); n != 1 {
				t.Fatalf("the follow-up's prompt is in the session %d times, want once", n)
			}
			// Nothing is left to run it again: no follow-up queued or
			// taken, in the database itself (the API lists only those
			// not taken).
			ctx := context.Background()
			st, err := postgres.Open(ctx, c.dsn, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if w, err := st.Queue("test").Waiting(ctx); err != nil || len(w) != 0 {
				t.Fatalf("follow-ups still queued or taken: %v, %v", w, err)
			}
		})
	}
}

// prompts counts the user messages of msgs with text.
func prompts(msgs []map[string]any, text string) int {
	n := 0
	for _, m := range msgs {
		if m["role"] == "user" && m["content"] == text {
			n++
		}
	}
	return n
}

// TestRunEndRecordedAfterAKill: replica a stores its run's final answer
// and is killed before it records the run's end. Replica b, once a's
// lease lapses, records that run as completed (the session says it
// ended), not as stopped before its end.
func TestRunEndRecordedAfterAKill(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	c := newCluster(t, "steps:\n  - text: \"Done.\"\n", "", 2*time.Second)
	a := c.start("a", "AK_TEST_FAULT=run.end=kill")
	b := c.start("b")
	sid := c.must(a, 201, "POST", "/v1/sessions", map[string]any{"title": "end"})["id"].(string)
	run := c.must(a, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "answer"})["run"].(map[string]any)
	waitExited(t, a)
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := c.must(b, 200, "GET", "/v1/sessions/"+sid+"/runs/"+run["id"].(string), nil)
		if got["status"] != "running" {
			if got["status"] != "completed" || strings.Contains(fmt.Sprint(got["error"]), "before the run ended") {
				t.Fatalf("a run whose answer was stored is recorded as %v: %v", got["status"], got["error"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never recorded the end of a's run: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := c.must(b, 200, "GET", "/v1/sessions/"+sid, nil); s["status"] != "idle" {
		t.Fatalf("the session is %v, want idle", s["status"])
	}
}

// TestServeWaitsForDatabase: kernel serve starts while PostgreSQL is down:
// /healthz answers, /readyz says not ready ("database unavailable",
// naming neither the database's user nor its host), the API answers 503;
// once the database is back it is ready and runs sessions.
func TestServeWaitsForDatabase(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	c := newClusterOn(t, srv, "steps:\n  - text: \"Back.\"\n", "", 2*time.Second)
	srv.Kill()
	a := c.start("a") // it must start at all
	if code, body, err := c.call(a, "GET", "/healthz", nil); err != nil || code != 200 {
		t.Fatalf("/healthz = %d %v, %v", code, body, err)
	}
	code, body, err := c.call(a, "GET", "/readyz", nil)
	if err != nil || code != 503 {
		t.Fatalf("/readyz with the database down = %d %v, %v; want 503", code, body, err)
	}
	raw, _ := json.Marshal(body)
	if checks, _ := body["checks"].(map[string]any); checks["store"] != "database unavailable" {
		t.Fatalf("/readyz says %s; want the store check to say database unavailable", raw)
	}
	for _, secret := range []string{pgtest.Superuser + "@", "127.0.0.1", fmt.Sprint(srv.Port())} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("/readyz names %q: %s", secret, raw)
		}
	}
	if code, body, _ := c.call(a, "POST", "/v1/sessions", map[string]any{"title": "too early"}); code != 503 {
		t.Fatalf("creating a session with the database down = %d %v, want 503", code, body)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, _, _ := c.call(a, "GET", "/readyz", nil); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready after the database came back:\n%s", a.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	sid := c.must(a, 201, "POST", "/v1/sessions", map[string]any{"title": "back"})["id"].(string)
	c.must(a, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "are you there"})
	c.waitStatus(a, sid, "idle", 60*time.Second)
}
