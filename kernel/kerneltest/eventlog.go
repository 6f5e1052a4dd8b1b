package kerneltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestEventLog runs the EventLog conformance suite on a Store that
// implements kernel.EventLog (and kernel.SessionDeleter, for the delete
// case). open must return a new, empty store for each call.
func TestEventLog(t *testing.T, open func(t *testing.T) kernel.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T, ids ...string) (kernel.Store, kernel.EventLog) {
		s := open(t)
		el, ok := s.(kernel.EventLog)
		if !ok {
			t.Fatalf("%T does not implement kernel.EventLog", s)
		}
		for _, id := range ids {
			mustCommit(t, s, id, kernel.Step{Meta: kernel.SessionMeta{ID: id, Created: t0, Updated: t0}})
		}
		return s, el
	}
	ev := func(typ string, n int) kernel.StoredEvent {
		return kernel.StoredEvent{Type: typ, Time: t0.Add(time.Duration(n) * time.Millisecond), Data: json.RawMessage(fmt.Sprintf(`{"type":%q,"n":%d}`, typ, n))}
	}

	t.Run("AppendRead", func(t *testing.T) {
		_, el := setup(t, "s1")
		first, err := el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{ev("run.started", 1), ev("turn.started", 2)})
		if err != nil || first != 1 {
			t.Fatalf("first append = %d, %v; want 1, nil", first, err)
		}
		first, err = el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{{Seq: 99, Type: "run.completed", Time: t0, Data: json.RawMessage(`{"type":"run.completed"}`)}})
		if err != nil || first != 3 {
			t.Fatalf("second append = %d, %v; want 3 (the caller's Seq is ignored), nil", first, err)
		}
		got, err := el.ReadEvents(ctx, "s1", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("read %d events, want 3", len(got))
		}
		for i, e := range got {
			if e.Seq != uint64(i+1) {
				t.Errorf("event %d has seq %d, want %d", i, e.Seq, i+1)
			}
		}
		if got[0].Type != "run.started" || string(got[0].Data) != `{"type":"run.started","n":1}` || !got[0].Time.Equal(t0.Add(time.Millisecond)) {
			t.Errorf("first event = %+v, want it as appended", got[0])
		}
		if got[2].Type != "run.completed" {
			t.Errorf("third event type = %q", got[2].Type)
		}
	})

	t.Run("AfterAndLimit", func(t *testing.T) {
		_, el := setup(t, "s1")
		var batch []kernel.StoredEvent
		for i := range 10 {
			batch = append(batch, ev("message.delta", i))
		}
		if _, err := el.AppendEvents(ctx, "s1", 0, batch); err != nil {
			t.Fatal(err)
		}
		got, err := el.ReadEvents(ctx, "s1", 4, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Seq != 5 || got[2].Seq != 7 {
			t.Fatalf("ReadEvents(after 4, limit 3) = %v, want seq 5..7", seqs(got))
		}
		if got, _ := el.ReadEvents(ctx, "s1", 10, 5); len(got) != 0 {
			t.Fatalf("ReadEvents(after the last) = %v, want none", seqs(got))
		}
		if got, _ := el.ReadEvents(ctx, "nope", 0, 5); len(got) != 0 {
			t.Fatalf("ReadEvents(unknown session) = %v, want none", seqs(got))
		}
	})

	t.Run("UnknownSession", func(t *testing.T) {
		_, el := setup(t)
		if _, err := el.AppendEvents(ctx, "nope", 0, []kernel.StoredEvent{ev("run.started", 1)}); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Fatalf("AppendEvents(unknown) = %v, want ErrSessionNotFound", err)
		}
	})

	t.Run("SessionsApart", func(t *testing.T) {
		_, el := setup(t, "a", "b")
		for range 3 {
			if _, err := el.AppendEvents(ctx, "a", 0, []kernel.StoredEvent{ev("a", 0)}); err != nil {
				t.Fatal(err)
			}
		}
		first, err := el.AppendEvents(ctx, "b", 0, []kernel.StoredEvent{ev("b", 0)})
		if err != nil || first != 1 {
			t.Fatalf("first event of b = %d, %v; want 1: sessions have their own sequence", first, err)
		}
		if got, _ := el.ReadEvents(ctx, "b", 0, 10); len(got) != 1 || got[0].Type != "b" {
			t.Fatalf("b's events = %+v", got)
		}
	})

	t.Run("DeleteRemovesEvents", func(t *testing.T) {
		s, el := setup(t, "s1")
		del, ok := s.(kernel.SessionDeleter)
		if !ok {
			t.Skip("the store cannot delete sessions")
		}
		if _, err := el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{ev("x", 1), ev("y", 2)}); err != nil {
			t.Fatal(err)
		}
		if err := del.Delete(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := el.ReadEvents(ctx, "s1", 0, 10); len(got) != 0 {
			t.Fatalf("events after Delete = %v, want none", seqs(got))
		}
		// A new session with the same id starts a new log.
		mustCommit(t, s, "s1", kernel.Step{Meta: kernel.SessionMeta{ID: "s1", Created: t0, Updated: t0}})
		if first, err := el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{ev("z", 3)}); err != nil || first != 1 {
			t.Fatalf("first event after re-create = %d, %v; want 1", first, err)
		}
	})

	t.Run("ConcurrentAppends", func(t *testing.T) {
		_, el := setup(t, "s1")
		const writers, each = 8, 20
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if _, err := el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{ev("w", w*each+i), ev("w", w*each+i)}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var all []kernel.StoredEvent
		for after := uint64(0); ; {
			got, err := el.ReadEvents(ctx, "s1", after, 50)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			all = append(all, got...)
			after = got[len(got)-1].Seq
		}
		if len(all) != writers*each*2 {
			t.Fatalf("read %d events, want %d", len(all), writers*each*2)
		}
		for i, e := range all {
			if e.Seq != uint64(i+1) {
				t.Fatalf("event %d has seq %d: sequence has a gap or a repeat", i, e.Seq)
			}
			// The two events of one append are adjacent.
			if i%2 == 1 && string(e.Data) != string(all[i-1].Data) {
				t.Fatalf("events %d and %d come from different appends: an append was interleaved", i, i+1)
			}
		}
	})
}

func seqs(evs []kernel.StoredEvent) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}
