package supervise

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Attempt is a start in progress that other callers wait for instead of
// starting a second one. Safe for concurrent use.
type Attempt struct {
	done chan struct{}
	err  error
}

// NewAttempt returns an attempt in progress.
func NewAttempt() *Attempt { return &Attempt{done: make(chan struct{})} }

// Finish records the attempt's outcome and wakes its waiters. Call it
// once.
func (a *Attempt) Finish(err error) {
	a.err = err
	close(a.done)
}

// Wait waits for the attempt to finish or ctx to be done. It returns the
// attempt's error when that failure is the waiter's answer too, and nil
// when the waiter should look again: the attempt succeeded, or it was only
// cancelled (the starter gave up, which says nothing to this caller). A
// done ctx returns ctx's error.
func (a *Attempt) Wait(ctx context.Context) error {
	select {
	case <-a.done:
		if a.err != nil && !errors.Is(a.err, context.Canceled) && !errors.Is(a.err, context.DeadlineExceeded) {
			return a.err
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// launch runs start(ctx, wait) as a new attempt published in *slot, so that callers
// arriving meanwhile wait for it (Wait) instead of starting another. mu
// guards *slot: it is held on entry and on return, and released while
// start runs. A failure is counted (counted is true: the owner records a
// crash) unless ctx is done or the error is errStop (the owner is
// closing), which say nothing about the health of what was started.
func launch[T any](ctx context.Context, mu *sync.Mutex, slot **Attempt, errStop error, wait time.Duration, start func(context.Context, time.Duration) (T, error)) (v T, counted bool, err error) {
	a := NewAttempt()
	*slot = a
	mu.Unlock()
	v, err = start(ctx, wait)
	mu.Lock()
	*slot = nil
	a.Finish(err)
	counted = err != nil && ctx.Err() == nil && !errors.Is(err, errStop)
	return v, counted, err
}
