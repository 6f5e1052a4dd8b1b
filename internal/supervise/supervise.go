// Package supervise is the state machine the subprocess plugin supervisor
// and the MCP server supervisor share: before every call, find the live
// process (or session), wait for a start in progress, wait out the
// restart backoff after a crash, refuse while the circuit breaker is
// open, or start a new one (RATIONALE.md, "One supervisor state
// machine"). Attempt is the start in progress that other callers wait
// for. The arithmetic is internal/backoff's; what each supervisor starts,
// and what it says, stays its own.
package supervise

import (
	"context"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/backoff"
)

// Gate points into a supervisor's own fields, all guarded by *Mu, and
// names the supervisor's parts of Acquire. The supervisor keeps its
// fields (its status report reads them) and builds its Gate once; a Gate
// holds nothing of its own and is not changed after it is built.
type Gate[T comparable] struct {
	Mu *sync.Mutex
	// Live is the running process or session; the zero T is none.
	Live *T
	// Starting is the start in progress, if any: callers arriving
	// meanwhile wait for it instead of starting another.
	Starting **Attempt
	// Crashes is the restart backoff and circuit breaker.
	Crashes *backoff.Breaker
	// Closed is set when the supervisor is closed: Acquire returns
	// ErrClosed, and a start that fails with ErrClosed is not a crash.
	Closed    *bool
	ErrClosed error

	// Dying, when not nil, is asked (Mu held) about the live value: a
	// non-nil channel means it is dead and its watcher is about to record
	// that (and count the crash); Acquire waits for the channel, then
	// looks again.
	Dying func(live T) <-chan struct{}
	// Refused is the error while the breaker is open at now (Mu held).
	Refused func(now time.Time) error
	// Start waits out wait, then starts and installs a new value (Mu not
	// held).
	Start func(ctx context.Context, wait time.Duration) (T, error)
	// Begin, when not nil, is called (Mu held) just before a start.
	Begin func()
	// End is called (Mu held) after a start with its error; counted is
	// true when the failure says something about the health of what was
	// started (not a caller that gave up, not a closing supervisor): the
	// supervisor records a crash.
	End func(err error, counted bool)
}

// Acquire returns the live value, starting one if there is none: it waits
// for a start in progress (and looks again if that start succeeded or was
// only cancelled by its caller), waits out the backoff after a crash, and
// refuses while the circuit breaker is open. Mu must not be held.
func (g *Gate[T]) Acquire(ctx context.Context) (T, error) {
	var zero T
	for {
		g.Mu.Lock()
		switch {
		case *g.Closed:
			g.Mu.Unlock()
			return zero, g.ErrClosed
		case *g.Live != zero:
			live := *g.Live
			var dying <-chan struct{}
			if g.Dying != nil {
				dying = g.Dying(live)
			}
			g.Mu.Unlock()
			if dying == nil {
				return live, nil
			}
			select {
			case <-dying:
				continue
			case <-ctx.Done():
				return zero, ctx.Err()
			}
		case *g.Starting != nil:
			a := *g.Starting
			g.Mu.Unlock()
			if err := a.Wait(ctx); err != nil {
				return zero, err // the start this call waited for failed
			}
			continue
		}
		now := time.Now()
		if g.Crashes.IsOpen(now) {
			err := g.Refused(now)
			g.Mu.Unlock()
			return zero, err
		}
		wait := g.Crashes.Wait(now)
		if g.Begin != nil {
			g.Begin()
		}
		v, counted, err := launch(ctx, g.Mu, g.Starting, g.ErrClosed, wait, g.Start)
		g.End(err, counted)
		g.Mu.Unlock()
		return v, err
	}
}
