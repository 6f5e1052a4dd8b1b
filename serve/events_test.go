package serve_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

const gateScript = `
steps:
  - text: "Let me wait for the gate, then read."
    tool_calls:
      - name: gate
        args: {}
  - text: "Reading now."
    tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - text: "All done, the notes say hello."
`

// TestSSEResume: a client that disconnects mid-run and reconnects with
// Last-Event-ID gets exactly what it missed: the two streams, put
// together, equal the session's stored events, in order, with no gap and
// no repeat; every event matches schemas/events.schema.json.
func TestSSEResume(t *testing.T) {
	gate := make(chan struct{})
	started := make(chan struct{}, 1)
	r := newRig(t, rigOpts{script: gateScript, tools: []kernel.Tool{gateTool("gate", gate, started)}})
	sid := r.newSession(r.alice)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "wait, then read"})

	// First connection: up to the gate's tool.started, then hang up.
	first, err := r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool { return e.typ == "tool.started" })
	if err != nil {
		t.Fatal(err)
	}
	<-started
	close(gate) // the run goes on while no client listens
	r.waitStatus(r.alice, sid, "idle")

	last := first[len(first)-1].id
	second, err := r.stream(ctx, r.alice, sid, last, func(e sseEvent) bool { return e.typ == "run.completed" })
	if err != nil {
		t.Fatal(err)
	}
	got := append(first, second...)

	stored, err := r.store.(kernel.EventLog).ReadEvents(ctx, sid, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(stored) {
		t.Fatalf("streams carried %d events, the store holds %d", len(got), len(stored))
	}
	evSchema, err := schemaOf("events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if e.id != strconv.FormatUint(stored[i].Seq, 10) || e.typ != stored[i].Type || e.data != string(stored[i].Data) {
			t.Fatalf("event %d: streamed %s %s %s, stored %d %s %s", i, e.id, e.typ, e.data, stored[i].Seq, stored[i].Type, stored[i].Data)
		}
		if stored[i].Seq != uint64(i+1) {
			t.Fatalf("stored event %d has id %d: a gap", i, stored[i].Seq)
		}
		if err := evSchema.ValidateJSON([]byte(e.data)); err != nil {
			t.Fatalf("event %s %s: %v\n%s", e.id, e.typ, err, e.data)
		}
		var typed struct{ Type string }
		json.Unmarshal([]byte(e.data), &typed)
		if typed.Type != e.typ {
			t.Fatalf("event %s: event: %s but data type %s", e.id, e.typ, typed.Type)
		}
	}
	if len(first) < 3 || len(second) < 3 {
		t.Fatalf("first stream %d events, second %d: the disconnect was not mid-run", len(first), len(second))
	}
	if !strings.Contains(got[len(got)-1].data, "All done") {
		t.Fatalf("last event = %s", got[len(got)-1].data)
	}
	// ?after=N resumes the same way (for clients that cannot set headers).
	third, err := r.streamAfter(ctx, r.alice, sid, last)
	if err != nil {
		t.Fatal(err)
	}
	if len(third) != len(second) || third[0].id != second[0].id {
		t.Fatalf("?after=%s gave %d events from %s, Last-Event-ID gave %d from %s", last, len(third), third[0].id, len(second), second[0].id)
	}
}

// TestStalledClient: a client that opens the stream and never reads does
// not hold up the run, nor another client's stream.
func TestStalledClient(t *testing.T) {
	// ~8 MiB of answer text: far more than the socket buffers hold.
	word := strings.Repeat("x", 1023) + " "
	r := newRig(t, rigOpts{answer: strings.Repeat(word, 8*1024), limits: serveLimits(2 * time.Second)})
	sid := r.newSession(r.alice)
	stalled := r.rawStream(t, r.alice, sid) // never read
	defer stalled.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan []sseEvent, 1)
	go func() {
		evs, _ := r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool { return e.typ == "run.completed" })
		done <- evs
	}()
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "talk"})
	r.waitStatus(r.alice, sid, "idle")
	evs := <-done
	if len(evs) == 0 || evs[len(evs)-1].typ != "run.completed" {
		t.Fatalf("the reading client got %d events, not the whole run", len(evs))
	}
}
