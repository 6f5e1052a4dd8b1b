package serve_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/serve"
)

// TestStepEventsRideTheCommit: on a store that commits a step with
// events (badger, postgres), a run's events are stored in the
// transaction of the step that follows them, and those that end the run
// (message.completed, run.completed) in its last step's: none is stored
// on its own. The events the client reads are
// all there, in order, ids 1..n without a gap or a repeat. The linger is
// an hour here, so which path each event takes is the cause under test,
// not a race.
func TestStepEventsRideTheCommit(t *testing.T) {
	for _, store := range []string{"badger", "postgres"} {
		t.Run(store, func(t *testing.T) {
			defer serve.SetLinger(time.Hour)()
			o := rigOpts{script: benchScript}
			switch store {
			case "badger":
				o.badger = filepath.Join(t.TempDir(), "store")
			case "postgres":
				o.pg, o.replica = pgtest.Shared(t).Migrated(t), "r1"
			}
			r := newRig(t, o)
			sid := r.newSession(r.alice)
			var mu sync.Mutex
			var attached []int // events stored with each step
			var last []string  // the types of the last step's events
			next := uint64(1)
			serve.SetBeforePublish(func(id string, first uint64, evs []kernel.StoredEvent) {
				n := len(evs)
				if id != sid {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if first != next {
					t.Errorf("a step's events start at %d, want %d", first, next)
				}
				next = first + uint64(n)
				attached = append(attached, n)
				last = last[:0]
				for _, e := range evs {
					last = append(last, e.Type)
				}
			})
			defer serve.SetBeforePublish(nil)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "read"})
			evs, err := r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool { return e.typ == "run.completed" })
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range evs {
				if seqOf(t, e) != uint64(i+1) {
					t.Fatalf("event %d (%s) has id %s: a gap or a repeat", i+1, e.typ, e.id)
				}
			}
			if evs[0].typ != "run.started" {
				t.Fatalf("first event %s, want run.started", evs[0].typ)
			}
			mu.Lock()
			defer mu.Unlock()
			// Four steps (the prompt, the answer with the call, the
			// call's result, the last answer), each after events of
			// its own.
			if len(attached) != 4 {
				t.Fatalf("events stored with %d steps (%v), want 4: the run's events did not ride its steps", len(attached), attached)
			}
			total := 0
			for _, n := range attached {
				if n == 0 {
					t.Fatalf("a step stored no event: %v", attached)
				}
				total += n
			}
			// The events that end the run (the last answer's
			// message.completed, run.completed) are stored with the last
			// step: none is stored on its own, after it.
			if total != len(evs) {
				t.Fatalf("%d events stored with steps, %d of %d after them, on their own (want none: the run's end rides its last step)", total, len(evs)-total, len(evs))
			}
			if n := len(last); n < 2 || last[n-2] != "message.completed" || last[n-1] != "run.completed" {
				t.Fatalf("the last step stored %v, want it to end with message.completed, run.completed", last)
			}
		})
	}
}

// TestStepEventsWithoutLinger: with no linger, each event is stored as
// it comes, as before (a step finds none waiting: the batch being stored
// is waited for, and takes them all); the stream is the same.
func TestStepEventsWithoutLinger(t *testing.T) {
	defer serve.SetLinger(0)()
	r := newRig(t, rigOpts{script: benchScript, badger: filepath.Join(t.TempDir(), "store")})
	sid := r.newSession(r.alice)
	var mu sync.Mutex
	attached := 0
	serve.SetBeforePublish(func(id string, first uint64, evs []kernel.StoredEvent) {
		mu.Lock()
		defer mu.Unlock()
		attached += len(evs)
	})
	defer serve.SetBeforePublish(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "read"})
	evs, err := r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool { return e.typ == "run.completed" })
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if seqOf(t, e) != uint64(i+1) {
			t.Fatalf("event %d (%s) has id %s", i+1, e.typ, e.id)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if attached != 0 {
		t.Fatalf("%d events stored with a step without linger", attached)
	}
}
