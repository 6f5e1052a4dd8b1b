package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/serve"
)

// postRun POSTs a prompt to the session's runs with Accept:
// text/event-stream; the caller reads and closes the response.
func (r *rig) postRun(ctx context.Context, key, sid string, body map[string]any) (*http.Response, error) {
	return r.postStream(ctx, key, "/v1/sessions/"+sid+"/runs", body)
}

// postStream POSTs body to path with Accept: text/event-stream.
func (r *rig) postStream(ctx context.Context, key, path string, body map[string]any) (*http.Response, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", r.url+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return http.DefaultClient.Do(req)
}

// refused is postRun for a request the server refuses: its status and
// JSON body, checked against serve/openapi.json.
func (r *rig) refused(t *testing.T, key, sid string, body map[string]any) (int, map[string]any) {
	t.Helper()
	return r.refusedAt(t, key, "/v1/sessions/"+sid+"/runs", body)
}

// refusedAt is refused for a POST to path.
func (r *rig) refusedAt(t *testing.T, key, path string, body map[string]any) (int, map[string]any) {
	t.Helper()
	res, err := r.postStream(context.Background(), key, path, body)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("a refused streaming run answered %d %s, not JSON: %s", res.StatusCode, ct, b)
	}
	p := resp{status: res.StatusCode, header: res.Header, body: b}
	checkAgainstOpenAPI(t, "POST", path, p)
	return res.StatusCode, p.json(t)
}

// twoRunScript answers two runs of benchScript's shape on one session.
const twoRunScript = `
steps:
  - text: "Reading."
    tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - text: "Done reading."
  - text: "Reading again."
    tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - text: "Done again."
`

// storedAfter is the session's stored events after seq.
func (r *rig) storedAfter(t *testing.T, sid string, seq uint64) []kernel.StoredEvent {
	t.Helper()
	evs, err := r.store.(kernel.EventLog).ReadEvents(context.Background(), sid, seq, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// frames renders events as the events endpoint frames them.
func frames(evs []kernel.StoredEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, e.Data)
	}
	return b.String()
}

// TestRunStreamIsTheEventsStream: a run POSTed with Accept:
// text/event-stream answers 200 with the run's own events — from its
// run.started to its run.completed, none of the session's earlier run —
// byte for byte what GET …/events?after= sends of the same run, with the
// same ids, and the response ends there. Location names the run.
func TestRunStreamIsTheEventsStream(t *testing.T) {
	r := newRig(t, rigOpts{script: twoRunScript})
	sid := r.newSession(r.alice)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "read"})
	r.waitStatus(r.alice, sid, "idle")
	before := r.storedAfter(t, sid, 0)
	if len(before) == 0 {
		t.Fatal("the first run stored no events")
	}
	cursor := before[len(before)-1].Seq

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.postRun(ctx, r.alice, sid, map[string]any{"prompt": "read again"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("streaming run: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	body, err := io.ReadAll(res.Body) // the response ends with the run
	if err != nil {
		t.Fatal(err)
	}
	loc := res.Header.Get("Location")
	rid := strings.TrimPrefix(loc, "/v1/sessions/"+sid+"/runs/")
	if rid == loc || !strings.HasPrefix(rid, "run_") {
		t.Fatalf("Location %q does not name a run of the session", loc)
	}
	run := r.must(200, "GET", loc, r.alice, nil)
	if run["id"] != rid || run["kind"] != "prompt" {
		t.Fatalf("Location's run: %v", run)
	}
	hello, events, ok := strings.Cut(string(body), "\n\n")
	if !ok || hello != ": kernel run "+rid+" of session "+sid {
		t.Fatalf("the stream opens with %q", hello)
	}

	mine := r.storedAfter(t, sid, cursor)
	if events != frames(mine) {
		t.Fatalf("the run's stream is not its stored events, framed:\n%s\nstored:\n%s", events, frames(mine))
	}
	if mine[0].Type != "run.started" || mine[len(mine)-1].Type != "run.completed" {
		t.Fatalf("the run's events go from %s to %s", mine[0].Type, mine[len(mine)-1].Type)
	}
	// The events endpoint sends the same bytes for the same run.
	got, err := r.streamAfter(ctx, r.alice, sid, strconv.FormatUint(cursor, 10))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range got {
		fmt.Fprintf(&b, "id: %s\nevent: %s\ndata: %s\n\n", e.id, e.typ, e.data)
	}
	if b.String() != events {
		t.Fatalf("GET …/events?after=%d sent\n%s\nthe run's stream\n%s", cursor, b.String(), events)
	}
}

// TestRunStreamEndsAtItsRun: a follow-up queued while the run streams
// runs after it on the same goroutine, but the stream ends with the
// run's own run.completed: none of the follow-up's events is in it.
func TestRunStreamEndsAtItsRun(t *testing.T) {
	gate := make(chan struct{})
	started := make(chan struct{}, 1)
	r := newRig(t, rigOpts{script: gateScript + "  - text: \"The follow-up's answer.\"\n", tools: []kernel.Tool{gateTool("gate", gate, started)}})
	sid := r.newSession(r.alice)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.postRun(ctx, r.alice, sid, map[string]any{"prompt": "wait, then read"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	<-started
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "and then?", "if_busy": "queue"})
	close(gate)
	evs, err := readSSE(res.Body, nil) // to the response's end
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	for _, e := range evs {
		if e.typ == "run.started" || e.typ == "run.completed" {
			ends++
		}
		if strings.Contains(e.data, "The follow-up's answer.") || strings.Contains(e.data, "and then?") {
			t.Fatalf("the run's stream carries the follow-up's event %s %s", e.typ, e.data)
		}
	}
	if ends != 2 || evs[len(evs)-1].typ != "run.completed" {
		t.Fatalf("the stream holds %d run.started/run.completed, and ends with %s", ends, evs[len(evs)-1].typ)
	}
	// The follow-up ran, after: its events follow the stream's last id.
	r.waitStatus(r.alice, sid, "idle")
	rest := r.storedAfter(t, sid, seqOf(t, evs[len(evs)-1]))
	if len(rest) == 0 || rest[0].Type != "run.started" || !strings.Contains(frames(rest), "The follow-up's answer.") {
		t.Fatalf("after the stream's last event the store holds: %s", frames(rest))
	}
	if n := r.srv.Stats().Streams; n != 0 {
		t.Fatalf("%d streams open after the response ended", n)
	}
}

// TestRunStreamAwaitingApproval: a run that stops for an approval ends
// its stream with run.completed (stop_reason awaiting_approval), after
// approval.required; the decision, POSTed with Accept:
// text/event-stream, streams the run it continues to its end, and the
// two streams together are the session's stored events.
func TestRunStreamAwaitingApproval(t *testing.T) {
	r := newRig(t, rigOpts{})
	sid := r.newSession(r.alice)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.postRun(ctx, r.alice, sid, map[string]any{"prompt": "update the notes"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	evs, err := readSSE(res.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	var end struct {
		StopReason string `json:"stop_reason"`
	}
	json.Unmarshal([]byte(last.data), &end)
	if last.typ != "run.completed" || end.StopReason != "awaiting_approval" {
		t.Fatalf("the stream ends with %s %s", last.typ, last.data)
	}
	asked := false
	for _, e := range evs {
		asked = asked || e.typ == "approval.required"
	}
	if !asked {
		t.Fatal("no approval.required in the run's stream")
	}
	r.waitStatus(r.alice, sid, "awaiting_approval")
	// The decision streams the run it continues, the same way: its
	// events follow the first stream's without a gap, to its end.
	res, err = r.postStream(ctx, r.alice, "/v1/sessions/"+sid+"/approval", map[string]any{"decision": "approve"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Location"), "/runs/run_") {
		t.Fatalf("streamed decision: %d %v", res.StatusCode, res.Header)
	}
	rest, err := readSSE(res.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(rest[len(rest)-1].data), &end)
	if rest[len(rest)-1].typ != "run.completed" || end.StopReason != "completed" {
		t.Fatalf("the decision's stream ends with %s %s", rest[len(rest)-1].typ, rest[len(rest)-1].data)
	}
	got := append(evs, rest...)
	stored := r.storedAfter(t, sid, 0)
	if len(got) != len(stored) {
		t.Fatalf("the two streams carried %d events, the store holds %d", len(got), len(stored))
	}
	for i, e := range got {
		if e.id != strconv.FormatUint(stored[i].Seq, 10) || e.typ != stored[i].Type || e.data != string(stored[i].Data) {
			t.Fatalf("event %d: streamed %s %s, stored %d %s", i, e.id, e.typ, stored[i].Seq, stored[i].Type)
		}
	}
	r.waitStatus(r.alice, sid, "idle")
}

// TestRunStreamClientGoes: a client that hangs up mid-run stops nothing:
// the run ends, its slot is freed, and GET …/events with the last id it
// read gives the rest, so the two together are the run's stored events.
func TestRunStreamClientGoes(t *testing.T) {
	gate := make(chan struct{})
	started := make(chan struct{}, 1)
	r := newRig(t, rigOpts{script: gateScript, tools: []kernel.Tool{gateTool("gate", gate, started)}})
	sid := r.newSession(r.alice)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.postRun(ctx, r.alice, sid, map[string]any{"prompt": "wait, then read"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := readSSE(res.Body, func(e sseEvent) bool { return e.typ == "tool.started" })
	res.Body.Close() // hang up
	if err != nil {
		t.Fatal(err)
	}
	<-started
	close(gate)
	r.waitStatus(r.alice, sid, "idle")
	second, err := r.stream(ctx, r.alice, sid, first[len(first)-1].id, func(e sseEvent) bool { return e.typ == "run.completed" })
	if err != nil {
		t.Fatal(err)
	}
	stored := r.storedAfter(t, sid, 0)
	got := append(first, second...)
	if len(got) != len(stored) {
		t.Fatalf("the two streams carried %d events, the store holds %d", len(got), len(stored))
	}
	for i, e := range got {
		if e.id != strconv.FormatUint(stored[i].Seq, 10) || e.typ != stored[i].Type || e.data != string(stored[i].Data) {
			t.Fatalf("event %d: streamed %s %s, stored %d %s", i, e.id, e.typ, stored[i].Seq, stored[i].Type)
		}
	}
	waitStreams(t, r, 0)
}

// waitStreams waits until the server holds n streams (a bound on a hang,
// not a speed claim).
func waitStreams(t *testing.T, r *rig, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for r.srv.Stats().Streams != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open, want %d", r.srv.Stats().Streams, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunStreamStalledClient: a client that POSTs a streaming run and
// never reads holds up neither the run nor another client's stream, and
// its write times out, freeing its slot.
func TestRunStreamStalledClient(t *testing.T) {
	word := strings.Repeat("x", 1023) + " " // ~8 MiB of answer: more than the socket buffers
	r := newRig(t, rigOpts{answer: strings.Repeat(word, 8*1024), limits: serveLimits(2 * time.Second)})
	sid := r.newSession(r.alice)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan []sseEvent, 1)
	go func() {
		evs, _ := r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool { return e.typ == "run.completed" })
		done <- evs
	}()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	body := `{"prompt":"talk"}`
	fmt.Fprintf(c, "POST /v1/sessions/%s/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", sid, r.alice, len(body), body)
	head, err := http.ReadResponse(bufio.NewReader(io.LimitReader(c, 4096)), nil)
	if err != nil || head.StatusCode != 200 {
		t.Fatalf("stalled client's run: %v %v", head, err)
	}
	// From here the client reads nothing.
	r.waitStatus(r.alice, sid, "idle")
	evs := <-done
	if len(evs) == 0 || evs[len(evs)-1].typ != "run.completed" {
		t.Fatalf("the reading client got %d events, not the whole run", len(evs))
	}
	waitStreams(t, r, 0)
}

// TestRunStreamRefusals: what refuses a run answers JSON, as without the
// header, and starts nothing: a session with a run in flight (409), a
// key at its stream limit (429, counted before the run starts), a key
// that may run but not read (403). A prompt queued behind a run in
// flight answers 202 with the queued message.
func TestRunStreamRefusals(t *testing.T) {
	gate := make(chan struct{})
	started := make(chan struct{}, 1)
	r := newRig(t, rigOpts{script: gateScript + "  - text: \"The follow-up's answer.\"\n", tools: []kernel.Tool{gateTool("gate", gate, started)},
		limits: serve.Limits{MaxStreamsPerKey: 1}})
	busy := r.newSession(r.alice)
	r.must(202, "POST", "/v1/sessions/"+busy+"/runs", r.alice, map[string]any{"prompt": "wait"})
	<-started
	if code, e := r.refused(t, r.alice, busy, map[string]any{"prompt": "again"}); code != 409 || e["error"].(map[string]any)["state"] != "running" {
		t.Fatalf("busy session: %d %v", code, e)
	}
	if code, e := r.refused(t, r.alice, busy, map[string]any{"prompt": "again", "if_busy": "queue"}); code != 202 || e["queued"] == nil {
		t.Fatalf("queued: %d %v", code, e)
	}

	// One stream per key: alice holds it; her streaming run is refused
	// before it starts.
	idle := r.newSession(r.alice)
	code, held := r.holdStream(t, r.alice)
	if code != 200 {
		t.Fatalf("holding a stream: %d", code)
	}
	if code, e := r.refused(t, r.alice, idle, map[string]any{"prompt": "read"}); code != 429 || e["error"].(map[string]any)["code"] != "too_many_streams" {
		t.Fatalf("over the stream limit: %d %v", code, e)
	}
	held.Close()
	runner := r.key("runner", "", "run")
	mine := r.newSession(runner)
	if code, e := r.refused(t, runner, mine, map[string]any{"prompt": "read"}); code != 403 || !strings.Contains(e["error"].(map[string]any)["message"].(string), "read scope") {
		t.Fatalf("a key without read: %d %v", code, e)
	}
	if runs := r.must(200, "GET", "/v1/sessions/"+idle+"/runs", r.alice, nil)["runs"].([]any); len(runs) != 0 {
		t.Fatalf("a refused streaming run started: %v", runs)
	}
	if n := r.srv.Stats().Runs; n != 1 {
		t.Fatalf("%d runs in flight, want the gated one alone", n)
	}
	close(gate)
	r.waitStatus(r.alice, busy, "idle")
}

// TestRunStreamOtherStarts: the other requests that start a run stream it
// the same way with the header: a named agent's first run (a new
// session, named by Location) and a follow-up posted to an idle session.
// A key without read is refused before the agent's session exists.
func TestRunStreamOtherStarts(t *testing.T) {
	r := newRig(t, rigOpts{script: benchScript + "  - text: \"Followed up.\"\n", reviewer: "steps:\n  - text: \"Reviewed.\"\n"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func(what string, res *http.Response, err error, want string) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		evs, err := readSSE(res.Body, nil)
		if err != nil || res.StatusCode != 200 || len(evs) == 0 || evs[len(evs)-1].typ != "run.completed" || !strings.Contains(evs[len(evs)-1].data, want) {
			t.Fatalf("%s: %d, %d events, %v", what, res.StatusCode, len(evs), err)
		}
		if evs[0].typ != "run.started" {
			t.Fatalf("%s: the stream starts with %s", what, evs[0].typ)
		}
		return res.Header.Get("Location")
	}
	before := len(r.must(200, "GET", "/v1/sessions", r.alice, nil)["sessions"].([]any))
	runner := r.key("agent-runner", "", "run")
	if code, e := r.refusedAt(t, runner, "/v1/agents/reviewer/runs", map[string]any{"prompt": "review"}); code != 403 || !strings.Contains(e["error"].(map[string]any)["message"].(string), "read scope") {
		t.Fatalf("a key without read: %d %v", code, e)
	}
	res, err := r.postStream(ctx, r.alice, "/v1/agents/reviewer/runs", map[string]any{"prompt": "review"})
	loc := check("agent run", res, err, "Reviewed.")
	sid, _, _ := strings.Cut(strings.TrimPrefix(loc, "/v1/sessions/"), "/")
	if s := r.must(200, "GET", "/v1/sessions/"+sid, r.alice, nil); s["agent"] != "reviewer" {
		t.Fatalf("Location's session %s: %v", sid, s)
	}
	if after := len(r.must(200, "GET", "/v1/sessions", r.alice, nil)["sessions"].([]any)); after != before+1 {
		t.Fatalf("%d sessions, then %d: want the agent's one more (the refused request made none)", before, after)
	}

	sid = r.newSession(r.alice)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "read"})
	r.waitStatus(r.alice, sid, "idle")
	res, err = r.postStream(ctx, r.alice, "/v1/sessions/"+sid+"/messages", map[string]any{"text": "and then?", "kind": "followup"})
	check("follow-up", res, err, "Followed up.")
}

// TestRunStreamAccept: the stream is for a client that prefers it; one
// that accepts JSON as well at the same weight (as MCP clients send)
// keeps the 202.
func TestRunStreamAccept(t *testing.T) {
	r := newRig(t, rigOpts{script: benchScript}) // each new session starts the script over
	for _, c := range []struct {
		accept string
		want   int
	}{
		{"text/event-stream", 200},
		{"application/json;q=0.5, text/event-stream", 200},
		{"text/event-stream, */*", 200},
		{"application/json, text/event-stream", 202},
		{"text/event-stream;q=0.2, application/json", 202},
		{"*/*", 202},
		{"", 202},
	} {
		sid := r.newSession(r.alice)
		req, _ := http.NewRequest("POST", r.url+"/v1/sessions/"+sid+"/runs", strings.NewReader(`{"prompt":"read"}`))
		req.Header.Set("Authorization", "Bearer "+r.alice)
		req.Header.Set("Content-Type", "application/json")
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("Accept %q: %d, want %d", c.accept, res.StatusCode, c.want)
		}
		r.waitStatus(r.alice, sid, "idle")
	}
}
