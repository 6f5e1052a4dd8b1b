package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/replica"
)

func open(t *testing.T, dir string) *queue.Dir {
	t.Helper()
	q, err := queue.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestOrderAndKinds(t *testing.T) {
	q := open(t, t.TempDir())
	ctx := context.Background()
	a, _ := q.Add(ctx, "s1", "first", queue.Steer)
	f, _ := q.Add(ctx, "s1", "later", queue.FollowUp)
	b, _ := q.Add(ctx, "s1", "second", queue.Steer)
	got, err := q.Take(ctx, "s1")
	if err != nil || len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID || got[0].Text != "first" {
		t.Fatalf("Take = %+v, %v", got, err)
	}
	if again, _ := q.Take(ctx, "s1"); len(again) != 0 {
		t.Fatalf("claimed messages offered twice: %+v", again)
	}
	if err := q.Delivered(ctx, "s1", []string{a.ID, b.ID}); err != nil {
		t.Fatal(err)
	}
	e, err := q.TakeFollowUp(ctx, "s1")
	if err != nil || e == nil || e.ID != f.ID {
		t.Fatalf("TakeFollowUp = %+v, %v", e, err)
	}
	if left, _ := q.List(ctx, "s1"); len(left) != 0 {
		t.Fatalf("left: %+v (a taken follow-up is not listed)", left)
	}
	if err := q.Cancel(ctx, "s1", f.ID); !errors.Is(err, queue.ErrNotQueued) {
		t.Fatalf("cancelling a taken follow-up = %v, want ErrNotQueued", err)
	}
	// Until its prompt is stored and it is marked delivered, a taken
	// follow-up is offered again: its taker may have stopped.
	if again, err := q.TakeFollowUp(ctx, "s1"); err != nil || again == nil || again.ID != f.ID || again.Text != "later" {
		t.Fatalf("TakeFollowUp before Delivered = %+v, %v; want the same follow-up", again, err)
	}
	if w, err := q.Waiting(ctx); err != nil || len(w) != 1 || w[0] != "s1" {
		t.Fatalf("Waiting = %v, %v; want [s1]", w, err)
	}
	if err := q.Delivered(ctx, "s1", []string{f.ID}); err != nil {
		t.Fatal(err)
	}
	if e, _ := q.TakeFollowUp(ctx, "s1"); e != nil {
		t.Fatalf("a delivered follow-up was taken again: %+v", e)
	}
	if w, err := q.Waiting(ctx); err != nil || len(w) != 0 {
		t.Fatalf("Waiting after delivery = %v, %v", w, err)
	}
}

func TestCancel(t *testing.T) {
	q := open(t, t.TempDir())
	ctx := context.Background()
	a, _ := q.Add(ctx, "s1", "never mind", queue.Steer)
	b, _ := q.Add(ctx, "s1", "keep this", queue.Steer)
	if err := q.Cancel(ctx, "s1", a.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := q.Take(ctx, "s1")
	if len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("Take after cancel = %+v", got)
	}
	// Too late: b is claimed.
	if err := q.Cancel(ctx, "s1", b.ID); !errors.Is(err, queue.ErrNotQueued) {
		t.Fatalf("cancel of a claimed message = %v", err)
	}
	if err := q.Cancel(ctx, "s1", a.ID); !errors.Is(err, queue.ErrNotQueued) {
		t.Fatalf("second cancel = %v", err)
	}
}

// TestCancelRacesTake hammers a cancel against a claim: each message is
// either delivered or cancelled, never both, never neither.
func TestCancelRacesTake(t *testing.T) {
	q := open(t, t.TempDir())
	ctx := context.Background()
	const n = 50
	ids := make([]string, n)
	for i := range n {
		e, err := q.Add(ctx, "s", fmt.Sprint(i), queue.Steer)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = e.ID
	}
	var wg sync.WaitGroup
	cancelled := make([]bool, n)
	taken := map[string]bool{}
	var mu sync.Mutex
	wg.Go(func() {
		for i, id := range ids {
			cancelled[i] = q.Cancel(ctx, "s", id) == nil
		}
	})
	wg.Go(func() {
		for range 20 {
			got, err := q.Take(ctx, "s")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, g := range got {
				taken[g.ID] = true
			}
			mu.Unlock()
		}
	})
	wg.Wait()
	got, _ := q.Take(ctx, "s")
	for _, g := range got {
		taken[g.ID] = true
	}
	for i, id := range ids {
		if cancelled[i] == taken[id] {
			t.Fatalf("message %d: cancelled=%v taken=%v", i, cancelled[i], taken[id])
		}
	}
}

// TestStaleClaimOfferedAgain: a claim left by a process that stopped before
// marking it delivered is offered to the next process.
func TestStaleClaimOfferedAgain(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	q1 := open(t, dir)
	a, _ := q1.Add(ctx, "s", "hello", queue.Steer)
	if got, _ := q1.Take(ctx, "s"); len(got) != 1 {
		t.Fatal("not taken")
	}
	q2 := open(t, dir) // the next process
	got, _ := q2.Take(ctx, "s")
	if len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("stale claim not offered: %+v", got)
	}
}

func TestBadSession(t *testing.T) {
	q := open(t, t.TempDir())
	for _, s := range []string{"", "..", "a/b", `a\b`} {
		if _, err := q.Add(context.Background(), s, "x", queue.Steer); err == nil {
			t.Errorf("Add(%q) accepted", s)
		}
	}
	if _, err := q.Add(context.Background(), "s", "  ", queue.Steer); err == nil {
		t.Error("empty message accepted")
	}
	if st, err := os.Stat(filepath.Join(q.Path())); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("queue dir mode %v %v", st.Mode(), err)
	}
}

func TestFollowUpContract(t *testing.T) {
	kerneltest.TestQueue(t, func(t *testing.T) (func(string) replica.Queue, func(string)) {
		dir := t.TempDir()
		return func(string) replica.Queue { return open(t, dir) }, func(string) {}
	})
}
