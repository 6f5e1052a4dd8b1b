package supervise_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/backoff"
	"github.com/agentkernel/agentkernel/internal/supervise"
)

var errClosed = errors.New("closed")

// owner is a minimal supervisor: its live value is an *int.
type owner struct {
	mu       sync.Mutex
	live     *int
	starting *supervise.Attempt
	crashes  backoff.Breaker
	closed   bool

	starts  atomic.Int32
	release chan struct{} // a start blocks until it is closed
	fail    error         // what a start returns
	crashed int           // counted failures
}

func (o *owner) gate() supervise.Gate[*int] {
	return supervise.Gate[*int]{
		Mu: &o.mu, Live: &o.live, Starting: &o.starting, Crashes: &o.crashes, Closed: &o.closed, ErrClosed: errClosed,
		Refused: func(time.Time) error { return errors.New("breaker open") },
		Start: func(ctx context.Context, _ time.Duration) (*int, error) {
			o.starts.Add(1)
			if o.release != nil {
				<-o.release
			}
			if o.fail != nil {
				return nil, o.fail
			}
			v := 1
			o.mu.Lock()
			o.live = &v
			o.mu.Unlock()
			return &v, nil
		},
		End: func(_ error, counted bool) {
			if counted {
				o.crashed++
				o.crashes.Failure(time.Now())
			}
		},
	}
}

// TestOneStartForManyCallers: callers arriving while a start is in
// progress wait for it and share its result; a second start would mean
// two processes for one plugin.
func TestOneStartForManyCallers(t *testing.T) {
	o := &owner{release: make(chan struct{}), crashes: backoff.Restarts(3, 0, time.Hour)}
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Go(func() {
			v, err := gateOf(o).Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	// Let the first start begin, then let it finish.
	for o.starts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(o.release)
	wg.Wait()
	if n := o.starts.Load(); n != 1 {
		t.Fatalf("%d starts, want 1", n)
	}
	for i, v := range got {
		if v != got[0] {
			t.Fatalf("caller %d got another value", i)
		}
	}
}

// TestBreakerOpensAndClosedRefuses: failures are counted as crashes until
// the breaker opens, then calls are refused without a start; a closed
// owner answers ErrClosed and a start failing with ErrClosed is no crash.
func TestBreakerOpensAndClosedRefuses(t *testing.T) {
	o := &owner{fail: errors.New("boom"), crashes: backoff.Restarts(2, 0, time.Hour)}
	for range 2 {
		if _, err := gateOf(o).Acquire(context.Background()); err == nil || err.Error() != "boom" {
			t.Fatalf("err = %v", err)
		}
	}
	if _, err := gateOf(o).Acquire(context.Background()); err == nil || err.Error() != "breaker open" {
		t.Fatalf("after 2 crashes: %v", err)
	}
	if o.starts.Load() != 2 || o.crashed != 2 {
		t.Fatalf("starts %d, crashes %d", o.starts.Load(), o.crashed)
	}

	o2 := &owner{fail: errClosed, crashes: backoff.Restarts(1, 0, time.Hour)}
	if _, err := gateOf(o2).Acquire(context.Background()); !errors.Is(err, errClosed) || o2.crashed != 0 {
		t.Fatalf("closing start: %v, %d crashes", err, o2.crashed)
	}
	o2.closed = true
	if _, err := gateOf(o2).Acquire(context.Background()); !errors.Is(err, errClosed) || o2.starts.Load() != 1 {
		t.Fatalf("closed: %v, %d starts", err, o2.starts.Load())
	}
}

// TestDyingIsWaitedFor: a live value its owner knows is dead is not
// handed out; Acquire waits for the watcher to clear it and starts anew.
func TestDyingIsWaitedFor(t *testing.T) {
	o := &owner{crashes: backoff.Restarts(3, 0, time.Hour)}
	dead := 0
	o.live = &dead
	gone := make(chan struct{})
	g := o.gate()
	g.Dying = func(v *int) <-chan struct{} {
		if v == &dead {
			return gone
		}
		return nil
	}
	go func() {
		o.mu.Lock()
		o.live = nil // the watcher records the death
		o.mu.Unlock()
		close(gone)
	}()
	v, err := g.Acquire(context.Background())
	if err != nil || v == &dead || o.starts.Load() != 1 {
		t.Fatalf("got %v, %v after %d starts", v, err, o.starts.Load())
	}
}

// BenchmarkAcquireLive is the cost every call pays when the process is
// running: build the Gate, lock, find the live value.
func BenchmarkAcquireLive(b *testing.B) {
	o := &owner{crashes: backoff.Restarts(3, 0, time.Hour)}
	v := 1
	o.live = &v
	ctx := context.Background()
	g := o.gate() // built once, as the supervisors do
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func gateOf(o *owner) *supervise.Gate[*int] {
	g := o.gate()
	return &g
}
