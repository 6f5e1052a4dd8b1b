package kernel

import (
	"context"
	"encoding/json"
)

// Call is one tool call on its way through the pipeline, after its arguments
// were parsed and validated. Hooks and policy receive it; only the goroutine
// running the call may modify it.
type Call struct {
	// ID is the model's tool_call_id.
	ID   string
	Tool ToolSpec
	// Args are the current arguments: valid against Tool.Schema. Change them
	// only through SetArgs.
	Args json.RawMessage
	// State is the run as policy sees it (read-only).
	State *State
	// Approved is set when a human approved the call: policy is not asked
	// again, but hooks still run.
	Approved bool

	value    map[string]any
	decision *Decision
	validate func(json.RawMessage) (map[string]any, error)
	emit     func(Event)
}

// Value returns the arguments decoded as JSON (numbers as float64). It must
// not be modified.
func (c *Call) Value() map[string]any { return c.value }

// SetArgs replaces the arguments after validating them against the tool's
// schema; invalid arguments are an error naming the failing paths and leave
// the call unchanged.
func (c *Call) SetArgs(args json.RawMessage) error {
	if c.validate == nil {
		return errNoValidator
	}
	v, err := c.validate(args)
	if err != nil {
		return err
	}
	c.Args, c.value = args, v
	return nil
}

// Emit sends an event on the run's event stream (hooks use it for
// hook.blocked, hook.rewrote and hook.failed). It is safe for concurrent use.
func (c *Call) Emit(e Event) {
	if c.emit != nil {
		c.emit(e)
	}
}

// NewCall builds a Call outside the loop, for tests of hooks and policies.
// validate may be nil, in which case SetArgs fails.
func NewCall(id string, spec ToolSpec, args json.RawMessage, st *State, validate func(json.RawMessage) (map[string]any, error), emit func(Event)) (*Call, error) {
	c := &Call{ID: id, Tool: spec, State: st, validate: validate, emit: emit}
	if validate != nil {
		if err := c.SetArgs(args); err != nil {
			return nil, err
		}
		return c, nil
	}
	v, err := decodeObject(args)
	if err != nil {
		return nil, err
	}
	c.Args, c.value = args, v
	return c, nil
}

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
