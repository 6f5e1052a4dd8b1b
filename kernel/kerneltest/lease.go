package kerneltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestLeaser runs the Leaser conformance suite on a Store that implements
// kernel.Leaser: one writer per session, fenced writes, expiry and
// takeover. open must return a new, empty store for each call. The expiry
// cases wait for short leases (a few hundred milliseconds) to lapse on
// the store's clock; they wait for the cause (a takeover that succeeds),
// never for a fixed time.
func TestLeaser(t *testing.T, open func(t *testing.T) kernel.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T) (kernel.Store, kernel.Leaser) {
		s := open(t)
		l, ok := s.(kernel.Leaser)
		if !ok {
			t.Fatalf("%T does not implement kernel.Leaser", s)
		}
		mustCommit(t, s, "s1", kernel.Step{Messages: sampleMessages(t0)[:1], Meta: kernel.SessionMeta{ID: "s1", Created: t0, Updated: t0}})
		return s, l
	}
	step := func(seq uint64, fence uint64) kernel.Step {
		return kernel.Step{Messages: []kernel.Message{{Seq: seq, Role: kernel.RoleUser, Content: fmt.Sprint("step ", seq), Time: t0}},
			Meta: kernel.SessionMeta{ID: "s1", Created: t0, Updated: t0}, Fence: fence}
	}
	// takeOver acquires s1 for owner, waiting for the current lease to
	// lapse.
	takeOver := func(t *testing.T, l kernel.Leaser, owner string, ttl time.Duration) kernel.Lease {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := l.AcquireLease(ctx, "s1", owner, ttl)
			if err == nil {
				return got
			}
			if !errors.Is(err, kernel.ErrLeaseHeld) || time.Now().After(deadline) {
				t.Fatalf("take over s1 as %s: %v", owner, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	t.Run("UnknownSession", func(t *testing.T) {
		_, l := setup(t)
		if _, err := l.AcquireLease(ctx, "nope", "a", time.Minute); !errors.Is(err, kernel.ErrSessionNotFound) {
			t.Fatalf("AcquireLease(unknown) = %v, want ErrSessionNotFound", err)
		}
	})

	t.Run("OneHolder", func(t *testing.T) {
		s, l := setup(t)
		a, err := l.AcquireLease(ctx, "s1", "a", time.Minute)
		if err != nil || a.Token == 0 || a.Owner != "a" {
			t.Fatalf("AcquireLease = %+v, %v; want a lease with a token", a, err)
		}
		_, err = l.AcquireLease(ctx, "s1", "b", time.Minute)
		var held *kernel.LeaseHeldError
		if !errors.As(err, &held) || held.Owner != "a" {
			t.Fatalf("a second owner's AcquireLease = %v, want a LeaseHeldError naming a", err)
		}
		// The holder writes with its token; nobody writes without one.
		mustCommit(t, s, "s1", step(2, a.Token))
		if err := s.Commit(ctx, "s1", step(3, 0)); !errors.Is(err, kernel.ErrLeaseHeld) {
			t.Fatalf("an unfenced step to a leased session: %v, want ErrLeaseHeld", err)
		}
		if err := s.Commit(ctx, "s1", step(3, a.Token+7)); !errors.Is(err, kernel.ErrLeaseLost) {
			t.Fatalf("a step with a wrong token: %v, want ErrLeaseLost", err)
		}
		got, err := s.Load(ctx, "s1")
		if err != nil || len(got.Messages) != 2 {
			t.Fatalf("after refused steps the session has %d messages (%v), want 2", len(got.Messages), err)
		}
		// Released, it is anyone's, with a larger token; the old token no
		// longer writes.
		if err := l.ReleaseLease(ctx, a); err != nil {
			t.Fatal(err)
		}
		b, err := l.AcquireLease(ctx, "s1", "b", time.Minute)
		if err != nil || b.Token <= a.Token {
			t.Fatalf("AcquireLease after release = %+v, %v; want a larger token than %d", b, err, a.Token)
		}
		if err := s.Commit(ctx, "s1", step(3, a.Token)); !errors.Is(err, kernel.ErrLeaseLost) {
			t.Fatalf("the released lease's token still writes: %v", err)
		}
		if _, err := l.RenewLease(ctx, a, time.Minute); !errors.Is(err, kernel.ErrLeaseLost) {
			t.Fatalf("RenewLease of a released lease = %v, want ErrLeaseLost", err)
		}
		if err := l.ReleaseLease(ctx, a); err != nil {
			t.Fatalf("releasing a lease no longer held: %v", err)
		}
		mustCommit(t, s, "s1", step(3, b.Token)) // a's release did not free b's lease
	})

	t.Run("ExpiryFencesTheLateWriter", func(t *testing.T) {
		s, l := setup(t)
		a, err := l.AcquireLease(ctx, "s1", "a", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		mustCommit(t, s, "s1", step(2, a.Token))
		b := takeOver(t, l, "b", time.Minute) // a paused past its lease
		if b.Token <= a.Token {
			t.Fatalf("takeover token %d is not larger than %d", b.Token, a.Token)
		}
		if err := s.Commit(ctx, "s1", step(3, a.Token)); !errors.Is(err, kernel.ErrLeaseLost) {
			t.Fatalf("the paused owner's late step: %v, want ErrLeaseLost", err)
		}
		if _, err := l.RenewLease(ctx, a, time.Minute); !errors.Is(err, kernel.ErrLeaseLost) {
			t.Fatalf("the paused owner's renewal: %v, want ErrLeaseLost", err)
		}
		mustCommit(t, s, "s1", step(3, b.Token))
		got, err := s.Load(ctx, "s1")
		if err != nil || len(got.Messages) != 3 || got.Messages[2].Content != "step 3" {
			t.Fatalf("session after the takeover: %+v, %v", got, err)
		}
	})

	// A Leaser that keeps events fences them as it fences steps.
	if _, events := open(t).(kernel.EventLog); events {
		t.Run("EventsAreFenced", func(t *testing.T) {
			s, l := setup(t)
			el := s.(kernel.EventLog)
			ev := func(typ string) []kernel.StoredEvent {
				return []kernel.StoredEvent{{Type: typ, Time: t0, Data: []byte(`{"type":"` + typ + `"}`)}}
			}
			a, err := l.AcquireLease(ctx, "s1", "a", 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if first, err := el.AppendEvents(ctx, "s1", a.Token, ev("a.1")); err != nil || first != 1 {
				t.Fatalf("the holder's append = %d, %v", first, err)
			}
			if _, err := el.AppendEvents(ctx, "s1", 0, ev("nobody")); !errors.Is(err, kernel.ErrLeaseHeld) {
				t.Fatalf("an unfenced append to a leased session: %v, want ErrLeaseHeld", err)
			}
			b := takeOver(t, l, "b", time.Minute) // a paused past its lease
			if _, err := el.AppendEvents(ctx, "s1", a.Token, ev("a.late")); !errors.Is(err, kernel.ErrLeaseLost) {
				t.Fatalf("the paused owner's late append: %v, want ErrLeaseLost", err)
			}
			if first, err := el.AppendEvents(ctx, "s1", b.Token, ev("b.1")); err != nil || first != 2 {
				t.Fatalf("the new owner's append = %d, %v; want 2: refused appends take no seq", first, err)
			}
			got, err := el.ReadEvents(ctx, "s1", 0, 10)
			if err != nil || len(got) != 2 || got[0].Type != "a.1" || got[1].Type != "b.1" {
				t.Fatalf("the log after the takeover: %+v, %v; want a.1, b.1", got, err)
			}
		})
	}

	t.Run("ExpiredUntakenLeaseDoesNotWrite", func(t *testing.T) {
		s, l := setup(t)
		a, err := l.AcquireLease(ctx, "s1", "a", 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		// Wait for the lapse by its effect: another owner could take it.
		b := takeOver(t, l, "b", 200*time.Millisecond)
		if err := l.ReleaseLease(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, "s1", step(2, a.Token)); !errors.Is(err, kernel.ErrLeaseLost) {
			t.Fatalf("a step with an expired lease's token: %v, want ErrLeaseLost", err)
		}
	})

	t.Run("RenewKeepsIt", func(t *testing.T) {
		_, l := setup(t)
		h, err := kernel.HoldLease(ctx, l, "s1", "a", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		// Renewed every 100ms: for well past its ttl nobody else gets it.
		until := time.Now().Add(time.Second)
		for time.Now().Before(until) {
			if _, err := l.AcquireLease(ctx, "s1", "b", time.Minute); !errors.Is(err, kernel.ErrLeaseHeld) {
				t.Fatalf("a held lease was granted to another owner: %v", err)
			}
			if h.Err() != nil {
				t.Fatalf("the held lease was lost: %v", h.Err())
			}
			time.Sleep(50 * time.Millisecond)
		}
		tok := h.Token()
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := l.AcquireLease(ctx, "s1", "b", time.Minute)
		if err != nil || b.Token <= tok {
			t.Fatalf("after Release: %+v, %v", b, err)
		}
	})

	t.Run("HeldLeaseNoticesTakeover", func(t *testing.T) {
		_, l := setup(t)
		h, err := kernel.HoldLease(ctx, l, "s1", "a", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(ctx)
		// Another owner steals it the way a takeover after a pause would:
		// the lease is released behind the holder's back, then granted.
		if err := l.ReleaseLease(ctx, h.Lease()); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AcquireLease(ctx, "s1", "b", time.Minute); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.Lost():
		case <-time.After(30 * time.Second):
			t.Fatal("the holder never noticed it lost the lease")
		}
		if !errors.Is(h.Err(), kernel.ErrLeaseLost) {
			t.Fatalf("Err = %v, want ErrLeaseLost", h.Err())
		}
	})

	t.Run("RacingAcquirers", func(t *testing.T) {
		_, l := setup(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := l.AcquireLease(ctx, "s1", fmt.Sprint("o", i), time.Minute)
				switch {
				case err == nil:
					mu.Lock()
					won++
					mu.Unlock()
				case !errors.Is(err, kernel.ErrLeaseHeld):
					t.Errorf("a losing acquirer got %v, want ErrLeaseHeld", err)
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d owners got the lease, want exactly 1", won)
		}
	})

	t.Run("DeleteRefusesALeasedSession", func(t *testing.T) {
		s, l := setup(t)
		d, ok := s.(kernel.SessionDeleter)
		if !ok {
			t.Skip("the store cannot delete sessions")
		}
		a, err := l.AcquireLease(ctx, "s1", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Delete(ctx, "s1"); !errors.Is(err, kernel.ErrLeaseHeld) {
			t.Fatalf("Delete of a leased session = %v, want ErrLeaseHeld", err)
		}
		if err := l.ReleaseLease(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := d.Delete(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
	})
}
