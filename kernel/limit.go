package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultToolQueueTimeout is Config.ToolQueueTimeout's default.
const DefaultToolQueueTimeout = 2 * time.Minute

// toolLimiter bounds how many tool executions run at once across every
// source (built-ins, plugins, WASM, MCP) and every run of a Kernel. A call
// over the limit waits in line (first come, first served as far as Go's
// channel wake-ups go), within Config.ToolQueueTimeout and not charged to
// its tool's timeout: a call that does not get a slot in time fails as a
// timeout that says so.
// The zero limit (nil limiter) lets everything through.
type toolLimiter struct {
	slots chan struct{}
}

func newToolLimiter(n int) *toolLimiter {
	if n <= 0 {
		return nil
	}
	return &toolLimiter{slots: make(chan struct{}, n)}
}

// tryAcquire takes a slot if one is free at once, and returns nil
// otherwise (and always without a limiter).
func (l *toolLimiter) tryAcquire() (release func()) {
	if l == nil {
		return nil
	}
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }
	default:
		return nil
	}
}

// acquire takes a slot, waiting at most until ctx (the call's queue
// deadline) is done. release gives it back and must be called exactly once.
func (l *toolLimiter) acquire(ctx context.Context) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, nil
	default:
	}
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// queueError is the result of a call that never got a slot: a timeout
// (the queue limit came first) or a cancellation.
func (l *toolLimiter) queueError(tool string, queueLimit time.Duration, err error) (Result, error) {
	if errors.Is(err, context.DeadlineExceeded) {
		te := &ToolError{Tool: tool, Code: "timeout", Err: fmt.Errorf("%w after %s (limits.tool_queue_timeout) waiting for one of the kernel's %d tool slots (limits.max_concurrent_tools): too many calls at once", ErrToolTimeout, queueLimit, cap(l.slots))}
		return Result{Content: "error: " + te.Err.Error(), IsError: true}, te
	}
	return Result{Content: Cancelled, IsError: true}, &ToolError{Tool: tool, Code: "cancelled", Err: ErrCancelled}
}

// queueTimeoutError is the error of a call whose queue limit came while
// it waited in its tool's own queues, when the tool gave no account.
func queueTimeoutError(tool string, queueLimit time.Duration) *ToolError {
	return &ToolError{Tool: tool, Code: "timeout", Err: fmt.Errorf("%w after %s (limits.tool_queue_timeout) waiting in line to start", ErrToolTimeout, queueLimit)}
}

// ownTimeout reports whether a tool that hit the kernel's deadline already
// said so itself, as a "timeout" ToolError with a result: its account
// (e.g. a WASM guest's stderr at the moment it was stopped) is kept rather
// than replaced by the kernel's bare one.
func ownTimeout(res Result, err error) (*ToolError, bool) {
	var te *ToolError
	if errors.As(err, &te) && te.Code == "timeout" && res.Content != "" {
		return te, true
	}
	return nil, false
}
