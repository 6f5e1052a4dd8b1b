package serve_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestDrain: on a drain (SIGTERM) the server stops taking requests, a run
// in flight reaches its step boundary and is stored as interrupted, the
// open stream ends with a final notice, and a new server on the same store
// lists the session as interrupted and resumes it to the end, without
// running a call twice.
func TestDrain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	gate := make(chan struct{})
	started := make(chan struct{}, 1)
	r := newRig(t, rigOpts{script: gateScript, badger: dir, drain: 20 * time.Second, tools: []kernel.Tool{gateTool("gate", gate, started)}})
	sid := r.newSession(r.alice)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "wait, then read"})
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	streamed := make(chan []sseEvent, 1)
	connected := make(chan struct{})
	go func() {
		var once bool
		evs, err := r.stream(ctx, r.alice, sid, "", func(sseEvent) bool {
			if !once {
				once = true
				close(connected)
			}
			return false
		}) // until the server ends it
		if err != nil {
			t.Errorf("stream: %v", err)
		}
		streamed <- evs
	}()
	<-connected
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	// Once the listener is closed the runs have been told; the drain
	// waits for the tool round in flight: let it finish.
	for {
		res, err := http.Get(r.url + "/healthz")
		if err != nil {
			break
		}
		res.Body.Close()
		time.Sleep(5 * time.Millisecond)
	}
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatalf("drain: %v", err)
	}
	evs := <-streamed
	if len(evs) == 0 {
		t.Fatal("the stream carried nothing")
	}
	last := evs[len(evs)-1]
	if last.typ != "notice" || last.id != "" || !strings.Contains(last.data, "shutting down") {
		t.Fatalf("the stream's last event = %+v, want a notice without an id", last)
	}
	var sawInterrupted bool
	for _, e := range evs {
		sawInterrupted = sawInterrupted || e.typ == "run.completed" && strings.Contains(e.data, `"stop_reason":"interrupted"`)
	}
	if !sawInterrupted {
		t.Fatalf("no run.completed with stop reason interrupted in %d events", len(evs))
	}
	r.close()

	// A new server on the same store: the session is interrupted, and
	// resumes to the end.
	gate2 := make(chan struct{})
	close(gate2)
	r2 := newRig(t, rigOpts{script: gateScript, badger: dir, tools: []kernel.Tool{gateTool("gate", gate2, nil)}})
	// The key file is beside the store: the first server's keys work.
	old := r.alice
	s := r2.must(200, "GET", "/v1/sessions/"+sid, old, nil)
	if s["status"] != "interrupted" {
		t.Fatalf("after restart: status %v, want interrupted", s["status"])
	}
	if got := r2.must(200, "GET", "/v1/sessions?status=interrupted", old, nil)["sessions"].([]any); len(got) != 1 {
		t.Fatalf("interrupted sessions = %v", got)
	}
	r2.must(409, "POST", "/v1/sessions/"+sid+"/runs", old, map[string]any{"prompt": "new"})
	// Resumed with Accept: text/event-stream, the response streams the
	// resumed run to its end.
	res, err := r2.postStream(context.Background(), old, "/v1/sessions/"+sid+"/resume", nil)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := readSSE(res.Body, nil)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || len(resumed) == 0 || resumed[len(resumed)-1].typ != "run.completed" || !strings.Contains(resumed[len(resumed)-1].data, `"stop_reason":"completed"`) {
		t.Fatalf("streamed resume: %d, %d events, %v", res.StatusCode, len(resumed), err)
	}
	if seqOf(t, resumed[0]) <= seqOf(t, evs[len(evs)-2]) {
		t.Fatalf("the resumed run's stream starts at %s, before the interrupted run's end (%s)", resumed[0].id, evs[len(evs)-2].id)
	}
	s = r2.waitStatus(old, sid, "idle")
	msgs := r2.must(200, "GET", "/v1/sessions/"+sid+"/messages", old, nil)["messages"].([]any)
	var gateResults, reads int
	for _, m := range msgs {
		mm := m.(map[string]any)
		if mm["role"] == "tool" && mm["tool_name"] == "gate" {
			gateResults++
		}
		if mm["role"] == "tool" && mm["tool_name"] == "read_file" {
			reads++
		}
	}
	if gateResults != 1 || reads != 1 {
		t.Fatalf("after resume: %d gate results, %d reads; want 1 each (nothing repeated)\n%v", gateResults, reads, msgs)
	}
	if last := msgs[len(msgs)-1].(map[string]any); last["content"] != "All done, the notes say hello." {
		t.Fatalf("last message = %v", last)
	}
	for i, m := range msgs {
		if m.(map[string]any)["seq"].(float64) != float64(i+1) {
			t.Fatalf("message %d has seq %v", i, m.(map[string]any)["seq"])
		}
	}
}

// TestLimits: runs over the global or the per-key cap get 429 with
// Retry-After; a drain refuses new work with 503.
func TestLimits(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	script := "steps:\n  - tool_calls:\n      - name: gate\n        args: {}\n  - text: done\n"
	r := newRig(t, rigOpts{script: script, limits: serveLimitsRuns(3, 2), tools: []kernel.Tool{gateTool("gate", gate, nil)}})
	var sids []string
	for range 4 {
		sids = append(sids, r.newSession(r.alice))
	}
	r.must(202, "POST", "/v1/sessions/"+sids[0]+"/runs", r.alice, map[string]any{"prompt": "a"})
	r.must(202, "POST", "/v1/sessions/"+sids[1]+"/runs", r.alice, map[string]any{"prompt": "b"})
	p := r.do("POST", "/v1/sessions/"+sids[2]+"/runs", r.alice, map[string]any{"prompt": "c"})
	if p.status != 429 || p.header.Get("Retry-After") == "" || !strings.Contains(string(p.body), `key \"alice\"`) {
		t.Fatalf("third run of alice = %d %q %s, want 429 per key with Retry-After", p.status, p.header.Get("Retry-After"), p.body)
	}
	bs := r.newSession(r.bob)
	r.must(202, "POST", "/v1/sessions/"+bs+"/runs", r.bob, map[string]any{"prompt": "d"})
	bs2 := r.newSession(r.bob)
	p = r.do("POST", "/v1/sessions/"+bs2+"/runs", r.bob, map[string]any{"prompt": "e"})
	if p.status != 429 || p.header.Get("Retry-After") == "" || !strings.Contains(string(p.body), "the server runs 3 runs") {
		t.Fatalf("fourth run = %d %s, want 429 global", p.status, p.body)
	}
	// A busy session refuses, queues or steers, as asked.
	p = r.do("POST", "/v1/sessions/"+sids[0]+"/runs", r.alice, map[string]any{"prompt": "again"})
	if p.status != 409 || p.json(t)["error"].(map[string]any)["state"] != "running" {
		t.Fatalf("run on a busy session = %d %s", p.status, p.body)
	}
	q := r.must(202, "POST", "/v1/sessions/"+sids[0]+"/runs", r.alice, map[string]any{"prompt": "later", "if_busy": "queue"})["queued"].(map[string]any)
	if q["kind"] != "followup" || q["run"] == nil {
		t.Fatalf("queued = %v", q)
	}
	st := r.must(202, "POST", "/v1/sessions/"+sids[0]+"/messages", r.alice, map[string]any{"text": "also this"})["queued"].(map[string]any)
	if st["kind"] != "steer" {
		t.Fatalf("steer = %v", st)
	}
}

// TestCrossOrigin: a page of another origin cannot drive the API (CSRF):
// a request with a foreign Origin is refused whatever it carries, and a
// form post (the one kind a page may send without a preflight) is not
// JSON. The page's own origin passes.
func TestCrossOrigin(t *testing.T) {
	r := newRig(t, rigOpts{})
	sid := r.newSession(r.alice)
	send := func(origin, ctype, body string) int {
		req, _ := http.NewRequest("POST", r.url+"/v1/sessions/"+sid+"/runs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+r.alice)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", ctype)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := send("https://evil.example", "application/json", `{"prompt":"x"}`); got != 403 {
		t.Errorf("cross-origin POST = %d, want 403", got)
	}
	if got := send("", "text/plain", `{"prompt":"x"}`); got != 415 {
		t.Errorf("text/plain POST = %d, want 415", got)
	}
	if got := send(r.url, "application/json", `{"prompt":"x"}`); got != 202 {
		t.Errorf("same-origin POST = %d, want 202", got)
	}
	res, err := http.Get(r.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("the page's CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || res.Header.Get("Set-Cookie") != "" {
		t.Errorf("the page allows inline script or sets a cookie: %q %q", csp, res.Header.Get("Set-Cookie"))
	}
}
