package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/scripted"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/serve"
)

// The crash test runs the server in a child process (this test binary,
// re-executed) so that it can be killed with SIGKILL mid-run.

const crashScript = `
steps:
  - text: "Reading first."
    tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - text: "Now waiting for the file gate."
    tool_calls:
      - name: filegate
        args: {}
  - text: "Finished after the crash."
`

// TestHelperServe is the child: a server on the store and keys the
// environment names, printing its address. It is not a test of its own.
func TestHelperServe(t *testing.T) {
	dir := os.Getenv("SERVE_HELPER_DIR")
	if dir == "" {
		t.Skip("only run as the crash test's child")
	}
	// SERVE_HELPER_HOLD=k: hold the k-th step stored with events between
	// its commit and the events' publication (TestKill9BetweenCommitAndPublish).
	if hold := os.Getenv("SERVE_HELPER_HOLD"); hold != "" {
		serve.SetLinger(time.Hour)
		var n int
		serve.SetBeforePublish(func(id string, first uint64, evs []kernel.StoredEvent) {
			n++
			if fmt.Sprint(n) == hold {
				b := fmt.Appendf(nil, "%d %d\n", first, len(evs))
				for _, e := range evs {
					b = fmt.Appendf(b, "%s %s\n", e.Type, e.Data)
				}
				os.WriteFile(filepath.Join(dir, "held.tmp"), b, 0o600)
				os.Rename(filepath.Join(dir, "held.tmp"), filepath.Join(dir, "held"))
				select {} // until killed
			}
		})
	}
	var store kernel.Store
	var q replica.Queue
	var replicaName string
	if dsn := os.Getenv("SERVE_HELPER_PG"); dsn != "" {
		ps, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		replicaName = "r1"
		store, q = ps, ps.Queue(replicaName)
	} else {
		bs, err := badger.Open(filepath.Join(dir, "store"), badger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		store = bs
	}
	tools, _, err := builtin.New(builtin.Config{Root: filepath.Join(dir, "ws"), Enable: []string{"read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	gate := kernel.NewTool(kernel.ToolSpec{Name: "filegate", Description: "waits for a file", Tier: kernel.TierSideEffecting, Source: "test", Schema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			os.WriteFile(filepath.Join(dir, "gate-started"), nil, 0o600)
			for {
				if _, err := os.Stat(filepath.Join(dir, "gate-open")); err == nil {
					return kernel.Result{Content: "gate open"}, nil
				}
				select {
				case <-ctx.Done():
					return kernel.Result{}, ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	reg := kernel.NewRegistry()
	if err := reg.Register(append(tools, gate)...); err != nil {
		t.Fatal(err)
	}
	sc, err := scripted.Parse("crash.yaml", []byte(crashScript))
	if err != nil {
		t.Fatal(err)
	}
	if q == nil {
		qd, err := queue.Open(filepath.Join(dir, "queue"), nil)
		if err != nil {
			t.Fatal(err)
		}
		q = qd
	}
	k, err := kernel.New(kernel.Config{Provider: scripted.New(sc), Store: store, Tools: reg, Model: "scripted", Inbox: q})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := serve.OpenKeys(filepath.Join(dir, "keys.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Config{Kernel: k, Store: store, Queue: q, Keys: keys, Replica: replicaName, LeaseTTL: 2 * time.Second, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LISTENING %s\n", ln.Addr())
	srv.Serve(context.Background(), ln, nil) // until killed
}

// child starts the server process and returns its URL.
func startChild(t *testing.T, dir string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServe$", "-test.v")
	cmd.Env = append(append(os.Environ(), "SERVE_HELPER_DIR="+dir), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd, "http://" + addr
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatal("the server child did not start")
	return nil, ""
}

// TestKill9 kills the server with SIGKILL while a run's tool call is in
// flight, restarts it on the same store, and checks that the session is
// intact (every acknowledged step there, once), its events resume without
// a repeated id, and the run resumes to the end without running the
// interrupted call again.
func TestKill9(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "ws"), 0o755)
	os.WriteFile(filepath.Join(dir, "ws", "notes.txt"), []byte("hello\n"), 0o644)
	keys, err := serve.OpenKeys(filepath.Join(dir, "keys.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := keys.Create("ops", "", []string{"admin"})
	if err != nil {
		t.Fatal(err)
	}
	cmd, url := startChild(t, dir)
	r := &rig{t: t, url: url}
	sid := r.newSession(key)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", key, map[string]any{"prompt": "read, then wait"})
	for { // the gate call is in flight
		if _, err := os.Stat(filepath.Join(dir, "gate-started")); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := r.must(200, "GET", "/v1/sessions/"+sid+"/messages", key, nil)["messages"].([]any)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen, err := r.stream(ctx, key, sid, "", func(e sseEvent) bool { return e.typ == "tool.started" && strings.Contains(e.data, "filegate") })
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	os.WriteFile(filepath.Join(dir, "gate-open"), nil, 0o600)
	cmd2, url2 := startChild(t, dir)
	defer func() { cmd2.Process.Kill(); cmd2.Wait() }()
	r.url = url2
	after := r.must(200, "GET", "/v1/sessions/"+sid+"/messages", key, nil)["messages"].([]any)
	if len(after) < len(before) {
		t.Fatalf("after the crash %d messages, before %d: an acknowledged step was lost", len(after), len(before))
	}
	for i := range before {
		b, _ := json.Marshal(before[i])
		a, _ := json.Marshal(after[i])
		if string(a) != string(b) {
			t.Fatalf("message %d changed across the crash:\n before %s\n after  %s", i+1, b, a)
		}
	}
	if s := r.must(200, "GET", "/v1/sessions/"+sid, key, nil); s["status"] != "interrupted" {
		t.Fatalf("status after the crash = %v, want interrupted", s["status"])
	}
	r.must(202, "POST", "/v1/sessions/"+sid+"/resume", key, nil)
	r.waitStatus(key, sid, "idle")
	msgs := r.must(200, "GET", "/v1/sessions/"+sid+"/messages", key, nil)["messages"].([]any)
	var gateResult string
	for i, m := range msgs {
		mm := m.(map[string]any)
		if mm["seq"].(float64) != float64(i+1) {
			t.Fatalf("message %d has seq %v: a gap or a repeat", i+1, mm["seq"])
		}
		if mm["tool_name"] == "filegate" {
			if gateResult != "" {
				t.Fatal("the interrupted call has two results")
			}
			gateResult = mm["content"].(string)
		}
	}
	if !strings.HasPrefix(gateResult, "interrupted:") {
		t.Fatalf("the call in flight at the crash got %q, want an interrupted result (never run again)", gateResult)
	}
	if last := msgs[len(msgs)-1].(map[string]any); last["content"] != "Finished after the crash." {
		t.Fatalf("last message = %v", last)
	}
	// The events resume after the last one the client saw, ids unique.
	lastSeen := seen[len(seen)-1].id
	rest, err := r.stream(ctx, key, sid, lastSeen, func(e sseEvent) bool { return e.typ == "run.completed" })
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, e := range append(seen, rest...) {
		if ids[e.id] {
			t.Fatalf("event id %s twice", e.id)
		}
		ids[e.id] = true
	}
	if seqOf(t, rest[0]) != seqOf(t, seen[len(seen)-1])+1 {
		t.Fatalf("after Last-Event-ID %s the stream starts at %s", lastSeen, rest[0].id)
	}
}

// TestKill9BetweenCommitAndPublish kills the server with SIGKILL after a
// step and the events before it are committed together and before the
// events are published, on both stores. After the restart the events a
// client resumes from its last seen id are there: the held ones once (no
// gap: they were durable with the step; no repeat: nothing stored them
// again), then the resumed run's, to run.completed; and the step is in
// the session.
func TestKill9BetweenCommitAndPublish(t *testing.T) {
	for _, store := range []string{"badger", "postgres"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "ws"), 0o755)
			os.WriteFile(filepath.Join(dir, "ws", "notes.txt"), []byte("hello\n"), 0o644)
			var env []string
			if store == "postgres" {
				env = append(env, "SERVE_HELPER_PG="+pgtest.Shared(t).Migrated(t))
			}
			keys, err := serve.OpenKeys(filepath.Join(dir, "keys.json"), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, key, err := keys.Create("ops", "", []string{"admin"})
			if err != nil {
				t.Fatal(err)
			}
			// The second step with events: the answer that calls read_file.
			cmd, url := startChild(t, dir, append(env, "SERVE_HELPER_HOLD=2")...)
			r := &rig{t: t, url: url}
			sid := r.newSession(key)
			r.must(202, "POST", "/v1/sessions/"+sid+"/runs", key, map[string]any{"prompt": "read, then wait"})
			var first, n uint64
			var heldLines []string // "type data" of each held event
			for {
				if b, err := os.ReadFile(filepath.Join(dir, "held")); err == nil {
					lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
					if _, err := fmt.Sscan(lines[0], &first, &n); err != nil {
						t.Fatal(err)
					}
					heldLines = lines[1:]
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if first < 2 || n == 0 {
				t.Fatalf("held step's events: first %d, %d of them", first, n)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			// What a client saw before the crash: everything before the
			// held events, nothing of them.
			seen, err := r.stream(ctx, key, sid, "", func(e sseEvent) bool { return seqOf(t, e) == first-1 })
			if err != nil {
				t.Fatal(err)
			}
			msgs := r.must(200, "GET", "/v1/sessions/"+sid+"/messages", key, nil)["messages"].([]any)
			if len(msgs) != 2 {
				t.Fatalf("%d messages stored while the step is held, want 2 (the prompt, the committed answer)", len(msgs))
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()

			os.WriteFile(filepath.Join(dir, "gate-open"), nil, 0o600)
			cmd2, url2 := startChild(t, dir, env...)
			defer func() { cmd2.Process.Kill(); cmd2.Wait() }()
			r.url = url2
			after := r.must(200, "GET", "/v1/sessions/"+sid+"/messages", key, nil)["messages"].([]any)
			if len(after) < 2 {
				t.Fatalf("after the crash %d messages: the committed step was lost", len(after))
			}
			// On postgres the dead replica's lease runs out first (2 s).
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				p := r.doNoCheck("POST", "/v1/sessions/"+sid+"/resume", key, nil)
				if p.status == 202 {
					break
				}
				if p.status != 409 || time.Now().After(deadline) {
					t.Fatalf("resume: %d %s", p.status, p.body)
				}
			}
			rest, err := r.stream(ctx, key, sid, seen[len(seen)-1].id, func(e sseEvent) bool { return e.typ == "run.completed" })
			if err != nil {
				t.Fatal(err)
			}
			all := append(seen, rest...)
			held := map[string]bool{}
			for i, e := range all {
				if got := seqOf(t, e); got != uint64(i+1) {
					t.Fatalf("event %d (%s) has id %d: a gap or a repeat across the crash", i+1, e.typ, got)
				}
				if seqOf(t, e) >= first && seqOf(t, e) < first+n {
					// The held events are there, as committed with the step.
					if want := heldLines[seqOf(t, e)-first]; e.typ+" "+e.data != want {
						t.Fatalf("event %d after the restart is %s %s; the held step's was %s", seqOf(t, e), e.typ, e.data, want)
					}
					held[e.data] = true
				}
			}
			if uint64(len(held)) != n || uint64(len(heldLines)) != n {
				t.Fatalf("%d distinct held events after the restart, %d held, want %d", len(held), len(heldLines), n)
			}
			for _, e := range all[first-1+n:] {
				if held[e.data] {
					t.Fatalf("held event %s stored twice", e.data)
				}
			}
			if all[len(all)-1].typ != "run.completed" {
				t.Fatalf("last event %s", all[len(all)-1].typ)
			}
		})
	}
}
