package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors that stop a call from the host side.
var (
	// ErrOutputLimit: the guest wrote more than max_output_bytes to stdout
	// or stderr. The call is stopped at once.
	ErrOutputLimit = errors.New("output limit exceeded")
	// ErrClosed: the Host was closed.
	ErrClosed = errors.New("wasm host closed")
)

// stderrKeep is how much of stderr's start and end a failed call reports.
const stderrKeep = 2048

// instanceIO is the per-instance side of a call: the capped stdout and
// stderr the guest writes to, and the call the instance currently serves,
// which output overflow cancels and sleeping waits on. An instance serves
// its initialisation and then exactly one call. Safe for concurrent use.
type instanceIO struct {
	maxOutput int

	mu      sync.Mutex
	stdout  bytes.Buffer
	errHead []byte
	errTail []byte // ring of the last stderrKeep bytes, in order
	errLen  int
	cancel  context.CancelCauseFunc
	done    <-chan struct{}
	tripped error
}

func newInstanceIO(maxOutput int) *instanceIO { return &instanceIO{maxOutput: maxOutput} }

// attach makes ctx/cancel the current call: output overflow cancels it and
// sleeps end when it is done.
func (x *instanceIO) attach(ctx context.Context, cancel context.CancelCauseFunc) {
	x.mu.Lock()
	x.done, x.cancel = ctx.Done(), cancel
	x.mu.Unlock()
}

// fail stops the current call with err as the cause.
func (x *instanceIO) fail(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.trip(err)
}

// trip records err and cancels the call; x.mu must be held.
func (x *instanceIO) trip(err error) {
	if x.tripped == nil {
		x.tripped = err
	}
	if x.cancel != nil {
		x.cancel(err)
	}
}

// cause is why the host stopped the call (a limit), or nil.
func (x *instanceIO) cause() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.tripped
}

// stdoutWriter is the guest's stdout.
type stdoutWriter struct{ x *instanceIO }

func (w stdoutWriter) Write(p []byte) (int, error) {
	x := w.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.tripped != nil {
		return 0, x.tripped
	}
	if room := x.maxOutput - x.stdout.Len(); len(p) > room {
		x.stdout.Write(p[:max(room, 0)])
		err := fmt.Errorf("%w: stdout is over %d bytes (max_output_bytes)", ErrOutputLimit, x.maxOutput)
		x.trip(err)
		return max(room, 0), err
	}
	return x.stdout.Write(p)
}

// stderrWriter is the guest's stderr: its start and end are kept for error
// messages, and it may not exceed max_output_bytes either.
type stderrWriter struct{ x *instanceIO }

func (w stderrWriter) Write(p []byte) (int, error) {
	x := w.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.tripped != nil {
		return 0, x.tripped
	}
	n := len(p)
	if x.errLen+n > x.maxOutput {
		n = max(x.maxOutput-x.errLen, 0)
	}
	q := p[:n]
	if room := stderrKeep - len(x.errHead); room > 0 {
		k := min(room, len(q))
		x.errHead = append(x.errHead, q[:k]...)
		q = q[k:]
	}
	if len(q) > 0 {
		x.errTail = append(x.errTail, q...)
		if len(x.errTail) > stderrKeep {
			x.errTail = append(x.errTail[:0], x.errTail[len(x.errTail)-stderrKeep:]...)
		}
	}
	x.errLen += n
	if n < len(p) {
		err := fmt.Errorf("%w: stderr is over %d bytes (max_output_bytes)", ErrOutputLimit, x.maxOutput)
		x.trip(err)
		return n, err
	}
	return n, nil
}

// output returns what the guest wrote to stdout.
func (x *instanceIO) output() []byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	return bytes.Clone(x.stdout.Bytes())
}

// stderrSummary is stderr's start and end, with a marker where bytes were
// left out.
func (x *instanceIO) stderrSummary() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := string(x.errHead)
	if skipped := x.errLen - len(x.errHead) - len(x.errTail); skipped > 0 {
		s += fmt.Sprintf("\n[... %d bytes of stderr left out ...]\n", skipped)
	}
	s += string(x.errTail)
	return string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
}

// sleep is the guest's nanosleep when the clock is granted. Unlike
// wazero's, it returns as soon as the current call is done, so poll_oneoff
// cannot hold a call past its deadline (the guest is then stopped at its
// next check).
func (x *instanceIO) sleep(ns int64) {
	if ns <= 0 {
		return
	}
	x.mu.Lock()
	done := x.done
	x.mu.Unlock()
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}
