package kerneltest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/replica"
)

// TestQueue runs the follow-up part of the replica.Queue contract on a
// queue: a taken follow-up stays (not listed, not cancellable, offered
// again to the next taker) until Delivered, so it runs exactly once with
// kernel.Kernel.RunQueued. open returns a new, empty queue as process
// (or replica) name sees it, two names seeing the same queue, and makes
// session id exist where the queue needs it.
func TestQueue(t *testing.T, open func(t *testing.T) (as func(name string) replica.Queue, newSession func(id string))) {
	ctx := context.Background()
	t.Run("TakenFollowUpStaysUntilDelivered", func(t *testing.T) {
		as, newSession := open(t)
		newSession("s1")
		a, b := as("a"), as("b")
		f1, err := a.Add(ctx, "s1", "first follow-up", queue.FollowUp)
		if err != nil {
			t.Fatal(err)
		}
		f2, err := a.Add(ctx, "s1", "second follow-up", queue.FollowUp)
		if err != nil {
			t.Fatal(err)
		}
		st, err := a.Add(ctx, "s1", "a steer", queue.Steer)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.TakeFollowUp(ctx, "s1")
		if err != nil || got == nil || got.ID != f1.ID || got.Text != "first follow-up" {
			t.Fatalf("TakeFollowUp = %+v, %v; want the oldest follow-up", got, err)
		}
		if l, _ := a.List(ctx, "s1"); len(l) != 2 || l[0].ID != f2.ID || l[1].ID != st.ID {
			t.Fatalf("List after the take = %+v; want the second follow-up and the steer (a taken one is not listed)", l)
		}
		if err := a.Cancel(ctx, "s1", f1.ID); !errors.Is(err, queue.ErrNotQueued) {
			t.Fatalf("Cancel of a taken follow-up = %v, want ErrNotQueued", err)
		}
		if w, err := a.Waiting(ctx); err != nil || !slices.Contains(w, "s1") {
			t.Fatalf("Waiting = %v, %v; want s1", w, err)
		}
		// a stopped before storing the prompt: the next taker gets it.
		again, err := b.TakeFollowUp(ctx, "s1")
		if err != nil || again == nil || again.ID != f1.ID {
			t.Fatalf("another taker's TakeFollowUp = %+v, %v; want the follow-up a left taken", again, err)
		}
		steers, err := b.Take(ctx, "s1")
		if err != nil || len(steers) != 1 || steers[0].ID != st.ID {
			t.Fatalf("Take = %+v, %v; want the steer only, never a follow-up", steers, err)
		}
		if err := b.Delivered(ctx, "s1", []string{f1.ID, st.ID}); err != nil {
			t.Fatal(err)
		}
		next, err := b.TakeFollowUp(ctx, "s1")
		if err != nil || next == nil || next.ID != f2.ID {
			t.Fatalf("TakeFollowUp after the first was delivered = %+v, %v; want the second", next, err)
		}
		if err := b.Delivered(ctx, "s1", []string{f2.ID}); err != nil {
			t.Fatal(err)
		}
		if last, err := a.TakeFollowUp(ctx, "s1"); err != nil || last != nil {
			t.Fatalf("TakeFollowUp with none left = %+v, %v", last, err)
		}
		if w, err := a.Waiting(ctx); err != nil || slices.Contains(w, "s1") {
			t.Fatalf("Waiting with none left = %v, %v", w, err)
		}
	})
}
