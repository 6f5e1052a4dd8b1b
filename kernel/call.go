package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
)

// Call is one tool call on its way through the pipeline, after its arguments
// were parsed and validated. Hooks and policy receive it. It is closed: the
// tool, its spec and whether a human approved it are fixed when the kernel
// prepares the call, and the core runs exactly that tool; the only change a
// hook can make is the documented rewrite SetArgs, which re-validates. Only
// the goroutine running the call may call SetArgs.
type Call struct {
	id       string
	spec     ToolSpec
	tool     Tool // what the core runs; nil for calls built outside the loop
	args     json.RawMessage
	st       *State
	approved bool
	// origPaths maps a path-shaped argument to what the model typed when
	// the kernel resolved it to a different real path (see PathResolver).
	origPaths map[string]string
	touched   []string

	value    map[string]any
	decision *Decision
	// entry validates SetArgs' arguments; nil for calls built by NewCall.
	entry *entry
	// k sends Emit's events and dl bounds the core's execution: both nil
	// for calls built outside the loop, which the core refuses to run.
	k  *Kernel
	dl *deadlines
	// intent stores the call's intent right before the tool runs (side
	// effects are fenced: intent.go); nil for read-only calls, calls
	// whose intent is stored already, and calls built outside the loop.
	intent func(context.Context) error
	// ctx is the context of the call's first execution by the core: one
	// allocation less per call. A hook that runs the rest of the chain
	// again gets a fresh one for each further execution.
	ctx     callCtx
	ctxUsed atomic.Bool
	// deleg is the delegation of a call of an agent tool; nil otherwise.
	deleg *delegation
}

// newCtx returns zeroed memory for a context of the call's execution.
func (c *Call) newCtx() *callCtx {
	if c.ctxUsed.CompareAndSwap(false, true) {
		return &c.ctx
	}
	return new(callCtx)
}

// ID returns the model's tool_call_id.
func (c *Call) ID() string { return c.id }

// Tool returns the spec of the tool the call runs. The spec is a copy:
// changing it changes nothing.
func (c *Call) Tool() ToolSpec {
	s := c.spec
	s.Tags = slices.Clone(s.Tags)
	return s
}

// Args returns the current arguments, valid against Tool().Schema. The
// slice must not be modified; change the arguments with SetArgs.
func (c *Call) Args() json.RawMessage { return c.args }

// State returns a copy of the run as policy sees it; changing the copy
// changes nothing.
func (c *Call) State() *State {
	if c.st == nil {
		return nil
	}
	s := *c.st
	s.ToolCounts = maps.Clone(s.ToolCounts)
	s.RunCalls = slices.Clone(s.RunCalls)
	return &s
}

// Approved reports whether a human approved the call: policy is not asked
// again, but hooks still run.
func (c *Call) Approved() bool { return c.approved }

// Decision returns a copy of the policy's decision on the call, or nil
// before it or when no policy ruled on it (an approved call, no policy).
// After hooks see it: hooks receive the policy's verdict.
func (c *Call) Decision() *Decision {
	if c.decision == nil {
		return nil
	}
	d := *c.decision
	return &d
}

// Value returns the arguments decoded as JSON (numbers as float64). It must
// not be modified.
func (c *Call) Value() map[string]any { return c.value }

// ResolvedPaths returns, for every path-shaped argument the kernel resolved
// to a different real path, the argument's name and what the model typed.
// It is empty when every path was used as typed.
func (c *Call) ResolvedPaths() map[string]string { return maps.Clone(c.origPaths) }

// SetArgs replaces the arguments after validating them against the tool's
// schema; invalid arguments are an error naming the failing paths and leave
// the call unchanged.
func (c *Call) SetArgs(args json.RawMessage) error {
	if c.entry == nil {
		return errNoValidator
	}
	v, err := c.entry.validate(args)
	if err != nil {
		return err
	}
	c.args, c.value = args, v
	c.resolvePaths()
	return nil
}

// Emit sends an event on the run's event stream (hooks use it for
// hook.blocked, hook.rewrote and hook.failed). It is safe for concurrent use.
func (c *Call) Emit(e Event) {
	if c.k != nil {
		c.k.emit(e)
	}
}

// NewCall builds a Call outside the loop, as policy evaluation outside a
// run needs it (`policy test`, replay of a stored session): the arguments
// must be a JSON object but are not checked against spec.Schema, and SetArgs
// fails for want of a validator. Registry.NewCall builds one that validates;
// kerneltest.NewCall is the shorthand for tests.
func NewCall(id string, spec ToolSpec, args json.RawMessage, st *State) (*Call, error) {
	v, err := decodeObject(args)
	if err != nil {
		return nil, err
	}
	return &Call{id: id, spec: spec, st: st, args: args, value: v}, nil
}

// NewCall builds a Call of the named tool outside the loop, with its
// arguments validated against the tool's schema as the loop validates them
// (SetArgs validates again). Errors wrap ErrUnknownTool or ErrInvalidArgs.
func (r *Registry) NewCall(id, name string, args json.RawMessage, st *State) (*Call, error) {
	e, ok := r.entry(name)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	c := &Call{id: id, spec: e.spec, st: st, entry: e}
	if err := c.SetArgs(args); err != nil {
		return nil, err
	}
	return c, nil
}
