package wasm

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/backoff"
)

// ErrUnhealthy: a reactor module's initialisation failed breakerThreshold
// times in a row, so its calls fail fast until a retry succeeds.
var ErrUnhealthy = errors.New("module unhealthy")

// The breaker's settings: how many initialisations in a row must fail to
// open it, and the first and longest wait before a retry.
const (
	breakerThreshold  = 3
	breakerMinBackoff = time.Second
	breakerMaxBackoff = 5 * time.Minute
)

// breaker guards a reactor module whose _initialize (or warm-up) keeps
// failing or timing out. While it is closed, failures are counted; the
// breakerThreshold-th in a row opens it. While it is open, calls fail at
// once with the last failure as the reason, and nothing runs in the
// background: the pool stops refilling. Once the backoff has passed, the
// next call is let through as a probe, instantiating on demand; its
// success closes the breaker (and wakes the pool), its failure reopens it
// with twice the backoff, capped at breakerMaxBackoff. An idle unhealthy
// module therefore costs no CPU at all. Safe for concurrent use.
type breaker struct {
	mu      sync.Mutex
	b       backoff.Breaker // set from healthBreaker on first use
	probing bool
	reason  error
	now     func() time.Time // time.Now; tests may replace it
}

// healthBreaker is the breaker's policy: no wait between attempts while
// closed; open after breakerThreshold failures in a row, for
// breakerMinBackoff, doubled for each failed probe up to breakerMaxBackoff.
var healthBreaker = backoff.Breaker{
	Threshold: breakerThreshold,
	Open:      backoff.Exponential{Base: breakerMinBackoff, Max: breakerMaxBackoff},
}

// state returns the breaker's counters, set up on first use. b.mu is held.
func (b *breaker) state() *backoff.Breaker {
	if b.b.Threshold == 0 {
		b.b = healthBreaker
	}
	return &b.b
}

func (b *breaker) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

// admit says whether a call may go ahead: nil, with probe set when the
// call is the retry of an open breaker (it must instantiate on demand and
// report the outcome), or an ErrUnhealthy error to fail the call with.
func (b *breaker) admit() (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.state()
	if !st.Tripped() {
		return false, nil
	}
	now := b.clock()
	if b.probing || st.IsOpen(now) {
		wait := max(st.Until().Sub(now), 0).Round(time.Second)
		return false, fmt.Errorf("%w: its initialisation failed %d times in a row (next retry in %s): %v", ErrUnhealthy, st.Failures(), wait, b.reason)
	}
	b.probing = true
	return true, nil
}

// failure records a failed initialisation and reports whether the breaker
// is open afterwards.
func (b *breaker) failure(err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reason = err
	b.probing = false
	return b.state().Failure(b.clock())
}

// success records a successful initialisation and reports whether it
// closed an open breaker.
func (b *breaker) success() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing, b.reason = false, nil
	return b.state().Success()
}

// isOpen reports whether calls fail fast, and why.
func (b *breaker) isOpen() (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state().Tripped(), b.reason
}

// Health reports a WASM tool's state for `kernel tools`: "" while it is
// usable (loaded or not yet loaded), otherwise why its calls fail: the
// module did not load, or its initialisation keeps failing. The bool is
// false when t is not a tool of this package.
func Health(t any) (string, bool) {
	wt, ok := t.(*tool)
	if !ok {
		return "", false
	}
	m := wt.m
	select {
	case <-m.loaded:
		if m.loadErr != nil {
			return "unhealthy: " + firstLines(m.loadErr.Error(), 1), true
		}
	default:
	}
	if open, reason := m.health.isOpen(); open {
		return fmt.Sprintf("unhealthy: initialisation failed %d times in a row: %s", breakerThreshold, firstLines(fmt.Sprint(reason), 1)), true
	}
	return "", true
}
