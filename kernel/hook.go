package kernel

import "context"

// Handler runs a call and returns the result the model will read. A non-nil
// error classifies the outcome for the audit trail and the events (see
// ErrDenied, ErrBlocked, *ApprovalRequiredError, *ToolError); when Content is
// empty the loop shows the model err.Error().
type Handler interface {
	Handle(ctx context.Context, c *Call) (Result, error)
}

// HandlerFunc is a Handler as a function.
type HandlerFunc func(ctx context.Context, c *Call) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c *Call) (Result, error) { return f(ctx, c) }

// Hook is tool-call middleware. The kernel composes the hooks of Config in
// order around its core handler (policy decision, then execution): the first
// hook is outermost, so it sees the call first and the result last. Code
// before next.Handle is a before hook; code after it is an after hook.
type Hook func(next Handler) Handler
