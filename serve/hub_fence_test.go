package serve

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// fencedLog is an event log with one session's lease: it refuses an
// append whose fence is not the current token, as a Leaser store does.
type fencedLog struct {
	mu     sync.Mutex
	token  uint64
	events []kernel.StoredEvent
	fences []uint64
}

func (l *fencedLog) AppendEvents(_ context.Context, _ string, fence uint64, evs []kernel.StoredEvent) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fences = append(l.fences, fence)
	if fence != l.token {
		return 0, kernel.ErrLeaseLost
	}
	first := uint64(len(l.events)) + 1
	l.events = append(l.events, evs...)
	return first, nil
}

func (l *fencedLog) ReadEvents(context.Context, string, uint64, int) ([]kernel.StoredEvent, error) {
	return nil, nil
}

func (l *fencedLog) AcquireLease(_ context.Context, id, owner string, ttl time.Duration) (kernel.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.token++
	return kernel.Lease{SessionID: id, Owner: owner, Token: l.token, Expires: time.Now().Add(ttl)}, nil
}

func (l *fencedLog) RenewLease(_ context.Context, le kernel.Lease, ttl time.Duration) (kernel.Lease, error) {
	return le, nil
}

func (l *fencedLog) ReleaseLease(context.Context, kernel.Lease) error { return nil }

// TestHubFencesEvents: a run's events are appended with its lease's
// token, so once another owner took the session over (the token moved
// on) the store refuses them, whether or not this process has noticed
// the loss: none is stored or published.
func TestHubFencesEvents(t *testing.T) {
	log := &fencedLog{}
	lease, err := kernel.HoldLease(context.Background(), log, "s1", "me", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	var warned []string
	h := newHub(log, func(s string) string { return s }, func(f string, a ...any) { warned = append(warned, f) })
	tp := h.acquire("s1")
	defer h.release(tp)
	emit := h.sink(context.Background(), tp, "owner", lease)
	emit(kernel.TurnStarted{Turn: 1, MaxTurns: 8})
	tp.wait()
	log.mu.Lock()
	log.token++ // another owner took the session over; this process does not know yet
	log.mu.Unlock()
	emit(kernel.ToolCompleted{CallID: "c1", Tool: "write_file", Outcome: kernel.OutcomeOK})
	emit(kernel.RunFailed{SessionID: "s1", StopReason: kernel.StopError, Error: "session lease lost"})
	tp.wait()
	if len(log.events) != 1 || log.events[0].Type != "turn.started" {
		t.Fatalf("stored %d events, want only the one before the takeover", len(log.events))
	}
	for i, f := range log.fences {
		if f != lease.Token() {
			t.Fatalf("append %d carried fence %d, want the lease's token %d", i, f, lease.Token())
		}
	}
	if evs, ok := tp.since(0); !ok || len(evs) != 1 {
		t.Fatalf("published %d events, want 1", len(evs))
	}
	if len(warned) == 0 {
		t.Fatal("the refused events were dropped without a word")
	}
}
