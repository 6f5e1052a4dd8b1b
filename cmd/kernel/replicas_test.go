package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// The replica tests run `kernel serve` twice, as real processes (this
// test binary as the CLI, KERNEL_TEST_MAIN=1), on one PostgreSQL
// database, with one workspace and one key file, and drive them over
// HTTP: what the replicas share goes through the database, nothing else.

// cluster is the shared setting of a set of replicas.
type cluster struct {
	t    testing.TB
	dir  string
	dsn  string
	key  string // an admin key
	ttl  time.Duration
	poll time.Duration
}

// replicaProc is one `kernel serve` process.
type replicaProc struct {
	name   string
	url    string
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	exited chan struct{}
}

// newCluster prepares a database, a workspace, a configuration with
// script and policy, and an admin key.
func newCluster(t testing.TB, script, policy string, ttl time.Duration) *cluster {
	t.Helper()
	return newClusterOn(t, pgtest.Shared(t), script, policy, ttl)
}

// newClusterOn is newCluster on a database of srv.
func newClusterOn(t testing.TB, srv *pgtest.Server, script, policy string, ttl time.Duration) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), dsn: srv.NewDatabase(t), ttl: ttl, poll: 100 * time.Millisecond}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(c.dir, "ws"), 0o755)
	os.WriteFile(filepath.Join(c.dir, "ws", "notes.txt"), []byte("hello\n"), 0o644)
	write("script.yaml", script)
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\nstore: {driver: postgres, dsn_env: AK_TEST_DSN}\n" +
		"tools:\n  builtin:\n    enable: [read_file, write_file, list_dir, run_command]\n"
	if policy != "" {
		write("policy.yaml", policy)
		cfg += "policy: {file: policy.yaml}\n"
	}
	write("kernel.yaml", cfg)
	// The migration runs as a process of its own with the DSN in its
	// environment, as the replicas do: the test's environment stays as
	// it was, so the replica tests can run in parallel (t.Setenv refuses
	// a parallel test). A test that runs the CLI in-process on the
	// cluster's configuration sets AK_TEST_DSN itself.
	migrate := exec.Command(os.Args[0], "store", "migrate", "--config", c.cfg())
	migrate.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1", "AK_TEST_DSN="+c.dsn, "GORACE=atexit_sleep_ms=0")
	if b, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("store migrate: %v\n%s", err, b)
	}
	out, errOut, err := cli(t, "keys", "create", "ops", "--scopes", "admin", "--keys", c.keys())
	if err != nil {
		t.Fatalf("keys create: %v\n%s", err, errOut)
	}
	c.key = strings.TrimSpace(out)
	return c
}

func (c *cluster) cfg() string  { return filepath.Join(c.dir, "kernel.yaml") }
func (c *cluster) keys() string { return filepath.Join(c.dir, "keys.json") }
func (c *cluster) ws(name string) string {
	return filepath.Join(c.dir, "ws", name)
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// start runs replica name with --auto-resume, with env added to its
// environment (AK_TEST_FAULT arms a fault: faults_test.go).
func (c *cluster) start(name string, env ...string) *replicaProc {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--config", c.cfg(), "--keys", c.keys(), "--listen", "127.0.0.1:0",
		"--replica", name, "--lease-ttl", c.ttl.String(), "--poll", c.poll.String(), "--auto-resume", "--access-log", "")
	cmd.Env = append(append(os.Environ(), "KERNEL_TEST_MAIN=1", "AK_TEST_DSN="+c.dsn, "GORACE=atexit_sleep_ms=0"), env...)
	p := &replicaProc{name: name, cmd: cmd, stderr: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(p.stderr, pw)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { cmd.Wait(); pw.Close(); close(p.exited) }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case p.url = <-found:
	case <-p.exited:
		c.t.Fatalf("replica %s exited:\n%s", name, p.stderr.String())
	case <-time.After(60 * time.Second):
		c.t.Fatalf("replica %s did not start:\n%s", name, p.stderr.String())
	}
	c.t.Cleanup(func() { p.kill() })
	return p
}

// kill ends the process with SIGKILL (and continues it first, if
// stopped) and waits.
func (p *replicaProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Kill()
	<-p.exited
}

// call sends a request to p with c's key; it returns the status and the
// decoded JSON body (nil when empty or not JSON).
func (c *cluster) call(p *replicaProc, method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := http.Client{Timeout: 60 * time.Second}
	res, err := cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, nil, err
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return res.StatusCode, m, nil
}

func (c *cluster) must(p *replicaProc, status int, method, path string, body any) map[string]any {
	c.t.Helper()
	got, m, err := c.call(p, method, path, body)
	if err != nil || got != status {
		c.t.Fatalf("%s %s on %s = %d, %v, want %d: %v\n%s", method, path, p.name, got, err, status, m, p.stderr.String())
	}
	return m
}

// messages returns the session's messages as p serves them.
func (c *cluster) messages(p *replicaProc, sid string) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	for after := 0; ; {
		page := c.must(p, 200, "GET", fmt.Sprintf("/v1/sessions/%s/messages?after=%d&limit=1000", sid, after), nil)["messages"].([]any)
		if len(page) == 0 {
			return out
		}
		for _, m := range page {
			out = append(out, m.(map[string]any))
		}
		after += len(page)
	}
}

// waitStatus polls p until the session's status is want with no run in
// flight.
func (c *cluster) waitStatus(p *replicaProc, sid, want string, within time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := c.must(p, 200, "GET", "/v1/sessions/"+sid, nil)
		if s["status"] == want && s["active_run"] == nil {
			return s
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("session %s is %v on %s, want %s after %s: %v\n%s", sid, s["status"], p.name, want, within, s, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits for a file the gate command writes.
func waitFile(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sse reads p's event stream of sid from after until stop says so.
func (c *cluster) sse(ctx context.Context, p *replicaProc, sid, after string, stop func(typ, data string) bool) ([][3]string, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/v1/sessions/"+sid+"/events?after="+after, nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var out [][3]string
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 16<<20)
	var cur [3]string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur[2] != "" {
				out = append(out, cur)
				if stop(cur[1], cur[2]) {
					return out, nil
				}
			}
			cur = [3]string{}
		case strings.HasPrefix(line, "id: "):
			cur[0] = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur[1] = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur[2] += line[6:]
		}
	}
	return out, fmt.Errorf("the stream ended after %d events: %v", len(out), sc.Err())
}

// gateCall is a run_command call that says it started (a file) and then
// waits for the gate file: a tool call in flight for as long as the test
// wants.
func gateCall(name string) string {
	return fmt.Sprintf(`      - name: run_command
        args: {argv: [sh, -c, "touch %s.started; while [ ! -e %s.open ]; do sleep 0.02; done; echo %s passed"]}
`, name, name, name)
}

const replicaPolicy = `name: replicas
revision: "1"
defaults:
  tool_call: allow
rules:
  - id: ask-writes
    effect: ask
    tools: [write_file]
    when: "true"
    message: '"write " + join(call.paths, ", ")'
tests:
  - name: writes ask
    input:
      call: {tool: write_file, args: {path: a.txt, content: x}}
    expect:
      decision: ask
      rules: [ask-writes]
`

// TestReplicaProcesses: two kernel serve processes on one database. A run
// started on a waits in a tool call; b's event stream (opened before)
// shows a's events as a writes them; a steering message posted to b
// reaches the run on a at its next step boundary; the run then stops for
// an approval, which b lists and decides; the run continues on b to the
// end. Every event b streamed is the store's, in order.
func TestReplicaProcesses(t *testing.T) {
	script := "steps:\n  - text: \"Waiting at the gate.\"\n    tool_calls:\n" + gateCall("g1") +
		"  - match: {role: user, contains: \"mind the tests\"}\n    text: \"Steered.\"\n    tool_calls:\n" +
		"      - name: write_file\n        args: {path: notes.txt, content: \"hello\\nfrom the replicas\\n\"}\n" +
		"  - text: \"Done on whichever replica.\"\n"
	c := newCluster(t, script, replicaPolicy, 3*time.Second)
	a, b := c.start("a"), c.start("b")
	sid := c.must(a, 201, "POST", "/v1/sessions", map[string]any{"title": "two replicas"})["id"].(string)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	type res struct {
		evs [][3]string
		err error
	}
	onB := make(chan res, 1)
	go func() {
		evs, err := c.sse(ctx, b, sid, "0", func(typ, data string) bool {
			return typ == "run.completed" && strings.Contains(data, `"stop_reason":"completed"`)
		})
		onB <- res{evs, err}
	}()
	run := c.must(a, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "wait, then write"})["run"].(map[string]any)
	waitFile(t, c.ws("g1.started"))
	// A kernel run beside the replicas is one more writer: refused while a
	// runs the session, naming a. It runs in-process, so the DSN goes in
	// this process's environment (this test is not parallel).
	t.Setenv("AK_TEST_DSN", c.dsn)
	if _, _, err := cli(t, "run", "--config", c.cfg(), "--session", sid, "meanwhile"); err == nil || !strings.Contains(err.Error(), "is running on a") {
		t.Fatalf("kernel run on a session replica a runs: %v", err)
	}
	// b knows a's run is in flight, and queues the steer for it.
	q := c.must(b, 202, "POST", "/v1/sessions/"+sid+"/messages", map[string]any{"text": "mind the tests", "kind": "steer"})["queued"].(map[string]any)
	if q["run"] != run["id"] {
		t.Fatalf("b queued the steer for %v, want a's run %v", q["run"], run["id"])
	}
	os.WriteFile(c.ws("g1.open"), nil, 0o644)
	c.waitStatus(b, sid, "awaiting_approval", 60*time.Second)
	aps := c.must(b, 200, "GET", "/v1/approvals", nil)["approvals"].([]any)
	if len(aps) != 1 {
		t.Fatalf("b lists %d approvals, want a's one", len(aps))
	}
	dec := c.must(b, 202, "POST", "/v1/sessions/"+sid+"/approval", map[string]any{"decision": "approve", "note": "from b"})
	c.waitStatus(a, sid, "idle", 60*time.Second)
	got := <-onB
	if got.err != nil {
		t.Fatalf("b's stream: %v\na:\n%s\nb:\n%s", got.err, a.stderr.String(), b.stderr.String())
	}
	// Who ran what: the first run on a, the approval's on b.
	r1 := c.must(b, 200, "GET", "/v1/sessions/"+sid+"/runs/"+run["id"].(string), nil)
	r2 := c.must(a, 200, "GET", "/v1/sessions/"+sid+"/runs/"+dec["run"].(map[string]any)["id"].(string), nil)
	if r1["stop_reason"] != "awaiting_approval" || r2["status"] != "completed" || r2["kind"] != "approve" {
		t.Fatalf("runs: a's %v, b's %v", r1, r2)
	}
	msgs := c.messages(a, sid)
	var texts []string
	for _, m := range msgs {
		s, _ := m["content"].(string)
		texts = append(texts, s)
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"g1 passed", "mind the tests", "Steered.", "Done on whichever replica."} {
		if !strings.Contains(all, want) {
			t.Fatalf("the session lacks %q: %q", want, texts)
		}
	}
	if b, _ := os.ReadFile(c.ws("notes.txt")); string(b) != "hello\nfrom the replicas\n" {
		t.Fatalf("notes.txt = %q: the approved write did not run", b)
	}
	// b streamed exactly the stored events, a's among them.
	stored, err := c.sse(ctx, a, sid, "0", func(typ, data string) bool {
		return typ == "run.completed" && strings.Contains(data, `"stop_reason":"completed"`)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(got.evs) {
		t.Fatalf("b streamed %d events, the store has %d", len(got.evs), len(stored))
	}
	steered := false
	for i := range stored {
		if stored[i] != got.evs[i] {
			t.Fatalf("event %d: b streamed %v, stored %v", i, got.evs[i], stored[i])
		}
		steered = steered || stored[i][1] == "steer.delivered"
	}
	if !steered {
		t.Fatal("no steer.delivered event: the steer did not reach the run on a")
	}
}

// checkPairs checks that every tool message answers a call of the
// assistant message before it, once, and that no call of a message
// followed by another lacks its result.
func checkPairs(t *testing.T, msgs []map[string]any) {
	t.Helper()
	if p := pairProblem(msgs); p != "" {
		t.Fatal(p)
	}
}

// samePrefix fails unless every message of before is in after, unchanged,
// at the same place.
func samePrefix(t *testing.T, before, after []map[string]any) {
	t.Helper()
	if len(after) < len(before) {
		t.Fatalf("%d messages before, %d after: an acknowledged step was lost", len(before), len(after))
	}
	for i := range before {
		x, _ := json.Marshal(before[i])
		y, _ := json.Marshal(after[i])
		if !bytes.Equal(x, y) {
			t.Fatalf("message %d changed:\n before %s\n after  %s", i+1, x, y)
		}
	}
}

// callResult returns the result of the run_command call.
func callResult(msgs []map[string]any) (string, int) {
	var out string
	n := 0
	for _, m := range msgs {
		if m["role"] == "tool" && m["tool_name"] == "run_command" {
			out, _ = m["content"].(string)
			n++
		}
	}
	return out, n
}

const gateScript = "steps:\n  - text: \"At the gate.\"\n    tool_calls:\n" + "%s" + "  - text: \"Finished.\"\n"

// atTheGate starts replicas a and b, runs a session on a up to its gate
// call (named gate), and returns the session, a's run and the messages a
// client saw then.
func atTheGate(t *testing.T, gate string) (c *cluster, a, b *replicaProc, sid string, run map[string]any, before []map[string]any) {
	t.Helper()
	c = newCluster(t, fmt.Sprintf(gateScript, gateCall(gate)), "", 2*time.Second)
	a, b = c.start("a"), c.start("b")
	sid = c.must(a, 201, "POST", "/v1/sessions", map[string]any{"title": gate})["id"].(string)
	run = c.must(a, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "wait at the gate"})["run"].(map[string]any)
	waitFile(t, c.ws(gate+".started"))
	return c, a, b, sid, run, c.messages(b, sid)
}

// TestReplicaFencing: replica a is stopped (SIGSTOP) in the middle of a
// tool call, past its lease; replica b takes the session over and
// finishes it (the call in flight answered as interrupted, never run
// again); then a is continued, its call returns, and its late write is
// refused: the session holds b's history only, and a's run ends failed,
// saying it lost the lease.
func TestReplicaFencing(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	c, a, b, sid, run, before := atTheGate(t, "f")
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c.waitStatus(b, sid, "idle", 90*time.Second) // b took over after a's lease lapsed
	taken := c.messages(b, sid)
	samePrefix(t, before, taken)
	// a's command is not stopped (only the kernel is): open its gate and
	// let it finish, then continue a with the result in hand.
	os.WriteFile(c.ws("f.open"), nil, 0o644)
	time.Sleep(100 * time.Millisecond) // the command's loop sees the file
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = c.must(b, 200, "GET", "/v1/sessions/"+sid+"/runs/"+run["id"].(string), nil)
		if e, _ := got["error"].(string); got["status"] == "failed" && strings.Contains(e, "lease") && !strings.Contains(e, "stopped before") {
			break // a's own account: its write was refused
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's run never reported the refused write: %v\na:\n%s", got, a.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	final := c.messages(b, sid)
	if len(final) != len(taken) {
		x, _ := json.Marshal(final[len(taken):])
		t.Fatalf("a wrote after losing its lease: %s", x)
	}
	checkPairs(t, final)
	res, n := callResult(final)
	if n != 1 || !strings.HasPrefix(res, "interrupted") {
		t.Fatalf("the call in flight has %d results, %q; want one, interrupted (a's late %q refused)", n, res, "f passed")
	}
	if last := final[len(final)-1]; last["content"] != "Finished." {
		t.Fatalf("b did not finish the run: %v", last)
	}
}

// TestReplicaFailover: replica a is killed with SIGKILL in the middle of a
// tool call; replica b resumes the session once a's lease lapses (lease
// ttl plus at most one poll), answers the call in flight as interrupted
// and runs to the end; every message a client saw before the kill is
// there, once, unchanged.
func TestReplicaFailover(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	c, a, b, sid, run, before := atTheGate(t, "k")
	a.kill()
	killed := time.Now()
	var resumed map[string]any
	deadline := time.Now().Add(90 * time.Second)
	for resumed == nil {
		for _, r := range c.must(b, 200, "GET", "/v1/sessions/"+sid+"/runs", nil)["runs"].([]any) {
			if rr := r.(map[string]any); rr["kind"] == "resume" {
				resumed = rr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never resumed the session:\n%s", b.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("b resumed the session %s after the kill (lease ttl %s, poll %s)", time.Since(killed).Round(time.Millisecond), c.ttl, c.poll)
	c.waitStatus(b, sid, "idle", 60*time.Second)
	after := c.messages(b, sid)
	samePrefix(t, before, after)
	checkPairs(t, after)
	if res, n := callResult(after); n != 1 || !strings.HasPrefix(res, "interrupted") {
		t.Fatalf("the call in flight at the kill has %d results, %q; want one, interrupted", n, res)
	}
	if last := after[len(after)-1]; last["content"] != "Finished." {
		t.Fatalf("b did not finish the run: %v", last)
	}
	if got := c.must(b, 200, "GET", "/v1/sessions/"+sid+"/runs/"+run["id"].(string), nil); got["status"] != "failed" {
		t.Fatalf("a's run is %v after a died, want failed", got)
	}
}

// TestStoreCopy moves sessions from a Badger store into PostgreSQL and
// back with kernel store copy, each copy checked by comparing exports, and
// checks the round trip byte for byte; a second copy finds the sessions
// there and leaves them.
func TestStoreCopy(t *testing.T) {
	dir := t.TempDir()
	src, back := filepath.Join(dir, "src"), filepath.Join(dir, "back")
	t.Setenv("AK_COPY_DSN", pgtest.Shared(t).Migrated(t))
	pg := filepath.Join(dir, "pg.yaml")
	os.WriteFile(pg, []byte("store: {driver: postgres, dsn_env: AK_COPY_DSN}\n"), 0o600)
	golden := "../../kernel/store/badger/testdata/export.golden.jsonl"
	const goldenID = "06h06p6rta3zzj1h"
	if _, errOut, err := cli(t, "sessions", "import", golden, "--store", src); err != nil {
		t.Fatalf("import: %v\n%s", err, errOut)
	}
	want, _, err := cli(t, "sessions", "export", goldenID, "--store", src)
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := cli(t, "store", "copy", "--store", src, "--to", pg); err != nil || !strings.Contains(out, "copied "+goldenID) {
		t.Fatalf("copy to postgres: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := cli(t, "store", "copy", "--store", src, "--to", pg); err != nil || !strings.Contains(errOut, "0 sessions copied and checked, 1 already there") {
		t.Fatalf("a second copy: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := cli(t, "sessions", "ls", "--config", pg); err != nil || !strings.Contains(out, goldenID) {
		t.Fatalf("sessions ls on postgres: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := cli(t, "store", "copy", "--config", pg, "--to-store", back); err != nil || !strings.Contains(out, "copied "+goldenID) {
		t.Fatalf("copy back to badger: %v\n%s%s", err, out, errOut)
	}
	got, _, err := cli(t, "sessions", "export", goldenID, "--store", back)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Badger -> PostgreSQL -> Badger changed the session:\n want %s\n got  %s", want, got)
	}
}

// BenchmarkFailover measures failover: replica a is killed with SIGKILL
// in the middle of a run's tool call, and the time is taken until replica
// b has resumed the session (its resume run exists), with a lease ttl of
// 2s and a poll of 100ms. The expected value is the lease's remaining
// life (at most the ttl) plus at most one poll; it reports the p50 and
// p90.
func BenchmarkFailover(b *testing.B) {
	c := newCluster(b, fmt.Sprintf(gateScript, gateCall("fo")), "", 2*time.Second)
	rb := c.start("b")
	var took []time.Duration
	for i := range b.N {
		a := c.start(fmt.Sprint("a", i))
		os.Remove(c.ws("fo.started"))
		sid := c.must(a, 201, "POST", "/v1/sessions", map[string]any{"title": "failover"})["id"].(string)
		c.must(a, 202, "POST", "/v1/sessions/"+sid+"/runs", map[string]any{"prompt": "wait"})
		waitFile(b, c.ws("fo.started"))
		a.kill()
		killed := time.Now()
		for {
			resumed := false
			for _, r := range c.must(rb, 200, "GET", "/v1/sessions/"+sid+"/runs", nil)["runs"].([]any) {
				resumed = resumed || r.(map[string]any)["kind"] == "resume"
			}
			if resumed {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(killed))
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "p50-s")
	b.ReportMetric(took[min(len(took)-1, len(took)*9/10)].Seconds(), "p90-s")
	b.ReportMetric(c.ttl.Seconds(), "lease-ttl-s")
	b.ReportMetric(c.poll.Seconds(), "poll-s")
}
