package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors of session leases (Leaser) and of stores other processes share,
// for errors.Is.
var (
	// ErrLeaseHeld is returned when another holder has a live lease of
	// the session: by AcquireLease, and by a Leaser store's Commit of an
	// unfenced step (Step.Fence zero) to such a session.
	ErrLeaseHeld = errors.New("session is leased by another holder")
	// ErrLeaseLost is returned when a lease is no longer the holder's: it
	// expired, or another holder took the session over. A Leaser store
	// refuses a fenced step with it, and writes nothing.
	ErrLeaseLost = errors.New("session lease lost")
	// ErrStoreUnavailable is wrapped by a store's error when it could not
	// reach its database (a store on a server: postgres): nothing was
	// written, and the operation may be retried once it is back. A run
	// stopped by it resumes like an interrupted one.
	ErrStoreUnavailable = errors.New("session store unavailable")
)

// Lease is one holder's hold on a session, granted by a Leaser.
type Lease struct {
	SessionID string
	Holder    string
	// Token is the fencing token: it grows every time the lease is
	// granted, so a write carrying an older token (Step.Fence) comes from
	// a holder that lost the session and is refused.
	Token uint64
	// Expires is when the lease lapses unless renewed, on the store's
	// clock (only the store compares it).
	Expires time.Time
}

// LeaseHeldError is ErrLeaseHeld with who holds the lease and until when.
type LeaseHeldError struct {
	SessionID, Holder string
	Expires           time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("session %s is leased by %s until %s", e.SessionID, e.Holder, e.Expires.UTC().Format(time.RFC3339))
}

// Unwrap returns ErrLeaseHeld.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// HeldLease is a lease kept alive by a goroutine that renews it every
// third of its ttl, until Release. It is safe for concurrent use.
//
// A renewal that fails because the store says the lease is gone ends it at
// once; one that fails for another reason (the database is unreachable) is
// retried, and the lease counts as lost once ttl has passed since the last
// renewal the store confirmed, measured on this process's monotonic clock:
// by then the store may have granted it to another holder. Either way Lost
// is closed, and a run holding it (RunOptions.Lease) stops at its next
// step boundary without writing; its writes would be refused anyway.
type HeldLease struct {
	leaser Leaser
	ttl    time.Duration

	mu     sync.Mutex
	lease  Lease
	lost   chan struct{}
	cause  error
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

// HoldLease acquires session id's lease for holder and keeps it (see
// HeldLease). ttl must be at least 100ms. The goroutine it starts ends at
// Release.
func HoldLease(ctx context.Context, l Leaser, id, holder string, ttl time.Duration) (*HeldLease, error) {
	if ttl < 100*time.Millisecond {
		return nil, fmt.Errorf("hold lease of session %s: ttl %s is too short (at least 100ms)", id, ttl)
	}
	lease, err := l.AcquireLease(ctx, id, holder, ttl)
	if err != nil {
		return nil, err
	}
	return KeepLease(l, lease, ttl), nil
}

// KeepLease keeps lease, which the caller has just acquired from l
// (by a call that wrote more than the lease, such as a replica board's
// ClaimRun), as HoldLease keeps the one it acquires. ttl must be the
// lease's (at least 100ms).
func KeepLease(l Leaser, lease Lease, ttl time.Duration) *HeldLease {
	h := &HeldLease{leaser: l, ttl: ttl, lease: lease, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go h.keep(time.Now())
	return h
}

// Lease returns the lease as last renewed.
func (h *HeldLease) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// Token is the lease's fencing token (Step.Fence).
func (h *HeldLease) Token() uint64 { return h.Lease().Token }

// Lost is closed when the lease is lost (see HeldLease).
func (h *HeldLease) Lost() <-chan struct{} { return h.lost }

// Err returns why the lease was lost (wrapping ErrLeaseLost), or nil.
func (h *HeldLease) Err() error {
	select {
	case <-h.lost:
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.cause
	default:
		return nil
	}
}

func (h *HeldLease) keep(confirmed time.Time) {
	defer close(h.done)
	every := h.ttl / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		renewed, err := h.leaser.RenewLease(ctx, h.Lease(), h.ttl)
		cancel()
		switch {
		case err == nil:
			confirmed = time.Now()
			h.mu.Lock()
			h.lease = renewed
			h.mu.Unlock()
		case errors.Is(err, ErrLeaseLost):
			h.lose(err)
			return
		case time.Since(confirmed) >= h.ttl:
			h.lose(fmt.Errorf("%w: not renewed for %s (%v)", ErrLeaseLost, h.ttl, err))
			return
		}
		// Retry sooner while renewals fail: the lease runs out at
		// confirmed+ttl.
		next := every
		if err != nil {
			next = min(every, max(10*time.Millisecond, (h.ttl-time.Since(confirmed))/4))
		}
		t.Reset(next)
	}
}

func (h *HeldLease) lose(err error) {
	h.mu.Lock()
	h.cause = fmt.Errorf("session %s: %w", h.lease.SessionID, err)
	h.mu.Unlock()
	close(h.lost)
}

// Release stops renewing and gives the lease up (unless it was lost). It
// waits for the renewing goroutine; calling it again does nothing.
func (h *HeldLease) Release(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	close(h.stop)
	<-h.done
	if h.Err() != nil {
		return nil
	}
	return h.leaser.ReleaseLease(ctx, h.Lease())
}

// leaseLost reports whether the run's lease (RunOptions.Lease) is lost.
func (k *Kernel) leaseLost() error {
	if k.lease == nil {
		return nil
	}
	return k.lease.Err()
}

// fence is the token a run's steps carry (Step.Fence), zero without a
// lease.
func (k *Kernel) fence() uint64 {
	if k.lease == nil {
		return 0
	}
	return k.lease.Token()
}
