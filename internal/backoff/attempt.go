package backoff

import (
	"context"
	"errors"
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
