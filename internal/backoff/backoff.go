// Package backoff is the kernel's one restart and retry arithmetic: capped
// exponential backoff, with optional full jitter, and a circuit breaker
// over consecutive failures. The subprocess plugin supervisor, the MCP
// server supervisor, the WASM module health breaker and the model-call
// retries all use it, so "doubled each time, capped" means the same thing
// everywhere (RATIONALE.md, "One config engine").
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential is Base after the first failure, doubled for each further
// one, never more than Max. The zero value waits for nothing.
type Exponential struct {
	Base, Max time.Duration
}

// Delay is the wait after the n-th consecutive failure (n ≥ 1); 0 for
// n < 1 or a zero Base.
func (e Exponential) Delay(n int) time.Duration {
	if n < 1 || e.Base <= 0 {
		return 0
	}
	d := e.Base
	for i := 1; i < n && d < e.Max; i++ {
		d *= 2
	}
	if e.Max > 0 {
		d = min(d, e.Max)
	}
	return d
}

// FullJitter returns a random duration in [0, d): spread over the whole
// interval, retries of many clients do not arrive together. It returns 0
// for d ≤ 0.
func FullJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// Breaker counts consecutive failures of something that is retried on
// demand (a process restarted, a module re-initialised). While fewer than
// Threshold failures are in a row it is closed: the next attempt waits
// Retry.Delay(failures) after the last failure. The Threshold-th failure
// in a row trips it: it is open for Open.Delay(1), and each further
// failure in a row (the attempt made once it was open long enough)
// reopens it for Open.Delay(2), Open.Delay(3)... A success resets it.
//
// A Breaker is a value its owner keeps under the owner's own lock; it is
// not safe for concurrent use by itself.
type Breaker struct {
	// Threshold is how many failures in a row trip the breaker (at least
	// 1).
	Threshold int
	// Retry is the wait before an attempt while the breaker is closed.
	Retry Exponential
	// Open is how long the breaker stays open after tripping.
	Open Exponential

	fails int
	last  time.Time // of the last failure
	until time.Time // open until then
}

// Failure records a failure at now and reports whether the breaker is
// tripped afterwards.
func (b *Breaker) Failure(now time.Time) (tripped bool) {
	b.fails++
	b.last = now
	if b.Tripped() {
		b.until = now.Add(b.OpenFor())
	}
	return b.Tripped()
}

// Success records a success and reports whether the breaker was tripped
// before it (so the owner can say "available again").
func (b *Breaker) Success() (wasTripped bool) {
	wasTripped = b.Tripped()
	b.fails = 0
	return wasTripped
}

// Failures is the number of failures in a row.
func (b *Breaker) Failures() int { return b.fails }

// Tripped reports whether Threshold failures are in a row: the breaker
// is open, or was and waits for the success of a next attempt.
func (b *Breaker) Tripped() bool { return b.fails > 0 && b.fails >= max(b.Threshold, 1) }

// IsOpen reports whether attempts are refused at now.
func (b *Breaker) IsOpen(now time.Time) bool { return b.Tripped() && now.Before(b.until) }

// Until is the end of the open period (meaningful when Tripped).
func (b *Breaker) Until() time.Time { return b.until }

// Wait is how long an attempt at now waits first: Retry.Delay(failures)
// after the last failure, less the time passed since.
func (b *Breaker) Wait(now time.Time) time.Duration {
	if b.fails == 0 {
		return 0
	}
	return max(0, b.last.Add(b.Retry.Delay(b.fails)).Sub(now))
}

// Restarts is the breaker of a supervised process (a plugin, an MCP
// server): after a crash the next start waits backoff, doubled for each
// further crash in a row and capped at cooldown; maxCrashes crashes in a
// row open the breaker for cooldown, and each crash of a start made after
// that opens it again for cooldown.
func Restarts(maxCrashes int, backoff, cooldown time.Duration) Breaker {
	return Breaker{
		Threshold: maxCrashes,
		Retry:     Exponential{Base: backoff, Max: cooldown},
		Open:      Exponential{Base: cooldown, Max: cooldown},
	}
}

// Sleep waits for d, until ctx is done (its error) or until stop is closed
// (errStop). d ≤ 0 returns nil at once.
func Sleep(ctx context.Context, stop <-chan struct{}, errStop error, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStop
	}
}

// OpenFor is how long the last failure opened the breaker for; 0 when it
// is not tripped.
func (b *Breaker) OpenFor() time.Duration {
	if !b.Tripped() {
		return 0
	}
	return b.Open.Delay(b.fails - max(b.Threshold, 1) + 1)
}
