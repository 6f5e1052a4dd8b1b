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

// TestStepEventCommitter runs the conformance suite of
// kernel.StepEventCommitter on a Store that implements it (and
// kernel.EventLog). open must return a new, empty store for each call.
func TestStepEventCommitter(t *testing.T, open func(t *testing.T) kernel.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T) (kernel.Store, kernel.StepEventCommitter, kernel.EventLog) {
		s := open(t)
		sc, ok := s.(kernel.StepEventCommitter)
		if !ok {
			t.Fatalf("%T does not implement kernel.StepEventCommitter", s)
		}
		return s, sc, s.(kernel.EventLog)
	}
	ev := func(n int) kernel.StoredEvent {
		return kernel.StoredEvent{Type: "notice", Time: t0.Add(time.Duration(n) * time.Millisecond), Data: json.RawMessage(fmt.Sprintf(`{"type":"notice","n":%d}`, n))}
	}
	msg := func(seq uint64, text string) kernel.Message {
		return kernel.Message{Seq: seq, Role: kernel.RoleUser, Content: text, Time: t0}
	}
	meta := kernel.SessionMeta{ID: "s1", Created: t0, Updated: t0}
	readAll := func(t *testing.T, el kernel.EventLog) []kernel.StoredEvent {
		t.Helper()
		got, err := el.ReadEvents(ctx, "s1", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("Together", func(t *testing.T) {
		s, sc, el := setup(t)
		// The step creates the session: its events need no session before.
		first, err := sc.CommitWithEvents(ctx, "s1", kernel.Step{Messages: []kernel.Message{msg(1, "hi")}, Meta: meta}, []kernel.StoredEvent{ev(1), ev(2)})
		if err != nil || first != 1 {
			t.Fatalf("CommitWithEvents = %d, %v; want 1, nil", first, err)
		}
		if first, err := el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{ev(3)}); err != nil || first != 3 {
			t.Fatalf("an append after = %d, %v; want 3, nil", first, err)
		}
		first, err = sc.CommitWithEvents(ctx, "s1", kernel.Step{Messages: []kernel.Message{msg(2, "again")}, Meta: meta}, []kernel.StoredEvent{ev(4)})
		if err != nil || first != 4 {
			t.Fatalf("second CommitWithEvents = %d, %v; want 4, nil", first, err)
		}
		// No events: a plain commit.
		if first, err := sc.CommitWithEvents(ctx, "s1", kernel.Step{Meta: meta}, nil); err != nil || first != 0 {
			t.Fatalf("CommitWithEvents without events = %d, %v; want 0, nil", first, err)
		}
		sess, err := s.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(sess.Messages) != 2 || sess.Meta.LastSeq != 2 {
			t.Fatalf("stored %d messages, LastSeq %d; want 2, 2", len(sess.Messages), sess.Meta.LastSeq)
		}
		got := readAll(t, el)
		if len(got) != 4 {
			t.Fatalf("%d events stored, want 4", len(got))
		}
		for i, e := range got {
			if e.Seq != uint64(i+1) || string(e.Data) != string(ev(i+1).Data) {
				t.Fatalf("event %d = seq %d %s, want seq %d %s", i, e.Seq, e.Data, i+1, ev(i+1).Data)
			}
		}
	})

	t.Run("FailedStepStoresNoEvent", func(t *testing.T) {
		s, sc, el := setup(t)
		mustCommit(t, s, "s1", kernel.Step{Messages: []kernel.Message{msg(1, "hi")}, Meta: meta})
		if _, err := el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{ev(1)}); err != nil {
			t.Fatal(err)
		}
		// A seq conflict: the step is refused, and so are its events.
		_, err := sc.CommitWithEvents(ctx, "s1", kernel.Step{Messages: []kernel.Message{msg(5, "gap")}, Meta: meta}, []kernel.StoredEvent{ev(2), ev(3)})
		if !errors.Is(err, kernel.ErrSeqConflict) {
			t.Fatalf("CommitWithEvents with a seq gap = %v, want ErrSeqConflict", err)
		}
		if got := readAll(t, el); len(got) != 1 {
			t.Fatalf("%d events stored after a refused step, want 1 (the refused step's events are not stored)", len(got))
		}
		// The log goes on where it was.
		if first, err := el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{ev(2)}); err != nil || first != 2 {
			t.Fatalf("append after the refused step = %d, %v; want 2, nil", first, err)
		}
		if sess, err := s.Load(ctx, "s1"); err != nil || len(sess.Messages) != 1 {
			t.Fatalf("after the refused step: %v, %v", sess, err)
		}
	})

	t.Run("ConcurrentAppends", func(t *testing.T) {
		// Steps with events and plain appends at once: every event has
		// its own Seq, with no gap.
		s, sc, el := setup(t)
		mustCommit(t, s, "s1", kernel.Step{Meta: meta})
		var wg sync.WaitGroup
		const n = 20
		errs := make(chan error, 2*n)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range n {
				if _, err := sc.CommitWithEvents(ctx, "s1", kernel.Step{Messages: []kernel.Message{msg(uint64(i+1), "m")}, Meta: meta}, []kernel.StoredEvent{ev(i), ev(i)}); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range n {
				if _, err := el.AppendEvents(ctx, "s1", 0, []kernel.StoredEvent{ev(i)}); err != nil {
					errs <- err
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got := readAll(t, el)
		if len(got) != 3*n {
			t.Fatalf("%d events, want %d", len(got), 3*n)
		}
		for i, e := range got {
			if e.Seq != uint64(i+1) {
				t.Fatalf("event %d has seq %d: a gap or a repeat", i, e.Seq)
			}
		}
	})
}
