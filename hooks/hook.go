package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// Verdict is what a hook decided. The zero Verdict lets the call (or its
// result) through unchanged.
type Verdict struct {
	// Block stops the call in a before hook (policy is not asked, the tool
	// does not run) or withholds the result in an after hook. Reason is
	// what the model reads.
	Block  bool
	Reason string
	// Args, in a before hook, replace the call's arguments. They are
	// validated against the tool's schema again; invalid arguments are a
	// failure of the hook. After hooks must not set Args.
	Args json.RawMessage
	// Result, in a before hook, answers the call without asking policy or
	// running the tool (a short-circuit); in an after hook it replaces the
	// result.
	Result *kernel.Result
	// Context is a note for the model, appended to the result it reads
	// and labelled with the hook's name.
	Context string

	// what names the change for the hook.rewrote event ("result" unless a
	// built-in kind says "redacted" or "truncated").
	what string
}

// BeforeFunc is a before hook written in Go. It runs before the policy
// decision; c.Args are valid against the tool's schema. An error is a
// failure of the hook, handled by its failure mode.
type BeforeFunc func(ctx context.Context, c *kernel.Call) (Verdict, error)

// AfterFunc is an after hook written in Go. It sees every result (a tool's
// failure, a denial or a block by an inner hook too, with err set), except
// a call waiting for approval.
type AfterFunc func(ctx context.Context, c *kernel.Call, res kernel.Result, err error) (Verdict, error)

// Option configures a Go hook.
type Option func(*hook)

// When restricts a hook to the calls m matches.
func When(m *Matcher) Option { return func(h *hook) { h.match = m } }

// Fail sets a hook's failure mode (the default is FailClosed).
func Fail(mode FailMode) Option { return func(h *hook) { h.failOpen = mode == FailOpen } }

// Before returns a before hook named name. The kernel composes hooks in
// order around policy and execution (kernel.Config.Hooks), first outermost.
func Before(name string, fn BeforeFunc, opts ...Option) kernel.Hook {
	h := &hook{name: name, phase: PhaseBefore, before: fn}
	for _, o := range opts {
		o(h)
	}
	return h.kernelHook()
}

// After returns an after hook named name.
func After(name string, fn AfterFunc, opts ...Option) kernel.Hook {
	h := &hook{name: name, phase: PhaseAfter, after: fn}
	for _, o := range opts {
		o(h)
	}
	return h.kernelHook()
}

// HookError is a hook that failed: its matcher erred, its command could not
// run, timed out or answered something invalid, or its rewrite of the
// arguments does not fit the tool's schema. The loop sees it inside a
// *kernel.ToolError with Code "hook_failed".
type HookError struct {
	Hook  string
	Phase Phase
	Err   error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("hook %q (%s) failed: %v", e.Hook, e.Phase, e.Err)
}
func (e *HookError) Unwrap() error { return e.Err }

// BlockError is a hook blocking a call or its result; it wraps
// kernel.ErrBlocked. The loop sees it inside a *kernel.ToolError with Code
// "blocked".
type BlockError struct {
	Hook   string
	Phase  Phase
	Reason string
}

func (e *BlockError) Error() string { return fmt.Sprintf("blocked by hook %q: %s", e.Hook, e.Reason) }
func (e *BlockError) Unwrap() error { return kernel.ErrBlocked }

// hook is one tool hook of any kind, ready to wrap a handler; Options
// also configure PointHooks through it.
type hook struct {
	name       string
	phase      Phase
	match      *Matcher
	failOpen   bool
	before     BeforeFunc
	after      AfterFunc
	timeout    time.Duration // bounds before and after (Timeout)
	concurrent bool          // At only
}

// bound is ctx limited by the hook's Timeout, if any.
func (h *hook) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, h.timeout)
}

func (h *hook) kernelHook() kernel.Hook {
	return func(next kernel.Handler) kernel.Handler { return h.wrap(next) }
}

func (h *hook) wrap(next kernel.Handler) kernel.Handler {
	if h.phase == PhaseBefore {
		return &beforeHandler{h: h, next: next}
	}
	return &afterHandler{h: h, next: next}
}

type beforeHandler struct {
	h    *hook
	next kernel.Handler
}

func (b *beforeHandler) Handle(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
	h := b.h
	if h.match != nil {
		env := envFor(c, PhaseBefore, nil, nil)
		ok, err := h.match.Match(env)
		releaseEnv(env)
		if err != nil {
			return h.beforeFailed(ctx, c, b.next, fmt.Errorf("match %q: %w", h.match.src, err))
		}
		if !ok {
			return b.next.Handle(ctx, c)
		}
	}
	hctx, cancel := h.bound(ctx)
	v, err := h.before(hctx, c)
	cancel()
	if err != nil {
		return h.beforeFailed(ctx, c, b.next, err)
	}
	if v.Block {
		return h.block(c, v.Reason)
	}
	if v.Args != nil {
		if err := c.SetArgs(v.Args); err != nil {
			return h.beforeFailed(ctx, c, b.next, fmt.Errorf("rewritten arguments are invalid: %w", err))
		}
		h.rewrote(c, "args")
	}
	if v.Result != nil {
		res := *v.Result
		res.Content = withContext(res.Content, h.name, v.Context)
		h.rewrote(c, "short_circuit")
		return res, nil
	}
	res, err := b.next.Handle(ctx, c)
	if v.Context != "" && !awaitsApproval(err) {
		res.Content = withContext(res.Content, h.name, v.Context)
		h.rewrote(c, "context")
	}
	return res, err
}

type afterHandler struct {
	h    *hook
	next kernel.Handler
}

func (a *afterHandler) Handle(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
	h := a.h
	res, err := a.next.Handle(ctx, c)
	if awaitsApproval(err) {
		return res, err
	}
	if h.match != nil {
		env := envFor(c, PhaseAfter, &res, err)
		ok, merr := h.match.Match(env)
		releaseEnv(env)
		if merr != nil {
			return h.afterFailed(ctx, c, res, err, fmt.Errorf("match %q: %w", h.match.src, merr))
		}
		if !ok {
			return res, err
		}
	}
	hctx, cancel := h.bound(ctx)
	v, herr := h.after(hctx, c, res, err)
	cancel()
	if herr != nil {
		return h.afterFailed(ctx, c, res, err, herr)
	}
	if v.Block {
		return h.block(c, v.Reason)
	}
	if v.Args != nil {
		return h.afterFailed(ctx, c, res, err, errors.New("an after hook cannot change the arguments (updated_args)"))
	}
	if v.Result != nil {
		res = *v.Result
		what := v.what
		if what == "" {
			what = "result"
		}
		h.rewrote(c, what)
	}
	if v.Context != "" {
		res.Content = withContext(res.Content, h.name, v.Context)
		h.rewrote(c, "context")
	}
	return res, err
}

// block is the answer of a hook that blocks.
func (h *hook) block(c *kernel.Call, reason string) (kernel.Result, error) {
	if reason == "" {
		reason = "no reason given"
	}
	c.Emit(kernel.HookBlocked{Hook: h.name, Phase: string(h.phase), CallID: c.ID(), Tool: c.Tool().Name, Reason: reason})
	be := &BlockError{Hook: h.name, Phase: h.phase, Reason: reason}
	msg := be.Error()
	if h.phase == PhaseAfter {
		msg = fmt.Sprintf("result withheld by hook %q: %s", h.name, reason)
	}
	return kernel.Result{Content: msg, IsError: true}, &kernel.ToolError{Tool: c.Tool().Name, Code: "blocked", Err: be}
}

func (h *hook) rewrote(c *kernel.Call, what string) {
	c.Emit(kernel.HookRewrote{Hook: h.name, Phase: string(h.phase), CallID: c.ID(), Tool: c.Tool().Name, What: what})
}

func (h *hook) failed(c *kernel.Call, err error) {
	c.Emit(kernel.HookFailed{Hook: h.name, Phase: string(h.phase), CallID: c.ID(), Tool: c.Tool().Name, Error: err.Error(), FailOpen: h.failOpen})
}

// beforeFailed applies the failure mode to a before hook that failed.
func (h *hook) beforeFailed(ctx context.Context, c *kernel.Call, next kernel.Handler, err error) (kernel.Result, error) {
	if ctx.Err() != nil {
		return cancelled(c)
	}
	h.failed(c, err)
	if h.failOpen {
		return next.Handle(ctx, c)
	}
	he := &HookError{Hook: h.name, Phase: h.phase, Err: err}
	return kernel.Result{Content: fmt.Sprintf("not run: %v", he), IsError: true},
		&kernel.ToolError{Tool: c.Tool().Name, Code: "hook_failed", Err: he}
}

// afterFailed applies the failure mode to an after hook that failed.
func (h *hook) afterFailed(ctx context.Context, c *kernel.Call, res kernel.Result, err, herr error) (kernel.Result, error) {
	if ctx.Err() != nil {
		return cancelled(c)
	}
	h.failed(c, herr)
	if h.failOpen {
		return res, err
	}
	he := &HookError{Hook: h.name, Phase: h.phase, Err: herr}
	return kernel.Result{Content: fmt.Sprintf("result withheld: %v", he), IsError: true},
		&kernel.ToolError{Tool: c.Tool().Name, Code: "hook_failed", Err: he}
}

func cancelled(c *kernel.Call) (kernel.Result, error) {
	return kernel.Result{Content: kernel.Cancelled, IsError: true},
		&kernel.ToolError{Tool: c.Tool().Name, Code: "cancelled", Err: kernel.ErrCancelled}
}

func awaitsApproval(err error) bool {
	if err == nil {
		return false // without a heap-allocated target for errors.As
	}
	var ask *kernel.ApprovalRequiredError
	return errors.As(err, &ask)
}

// withContext appends a hook's note to a result.
func withContext(content, hook, note string) string {
	if note == "" {
		return content
	}
	sep := "\n\n"
	if content == "" {
		sep = ""
	}
	return content + sep + "[hook " + hook + "] " + note
}

var (
	_ kernel.Handler = (*beforeHandler)(nil)
	_ kernel.Handler = (*afterHandler)(nil)
)
