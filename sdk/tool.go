package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/agentkernel/agentkernel/internal/config/names"
	"github.com/agentkernel/agentkernel/tool"
)

// Tier says how much harm a tool can do; it is tool.Tier (and kernel.Tier).
type Tier = tool.Tier

// The tiers. Every tool declares one.
const (
	ReadOnly      = tool.TierReadOnly
	SideEffecting = tool.TierSideEffecting
	Privileged    = tool.TierPrivileged
)

// Result is what a handler returns; it is tool.Result (and Result).
type Result = tool.Result

// Spec describes a tool. The host shows the tool to the model as
// "<plugin>.<Name>".
type Spec struct {
	// Name is 1–48 characters of [A-Za-z0-9_-]. Required.
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// Schema is the JSON Schema of the arguments, a JSON object schema.
	// Empty means {"type":"object"}: any object. The kernel compiles it
	// when it loads the plugin and validates every call against it before
	// the plugin sees the call; the SDK itself only checks that it is a
	// JSON object of type "object" (so a plugin links no JSON Schema
	// library). sdktest validates exactly as the kernel does.
	Schema string
	// Tier is required: ReadOnly, SideEffecting or Privileged.
	Tier Tier
	// Tags are free-form labels policy rules can match on.
	Tags []string
	// Timeout bounds one call; zero leaves it to the host's configuration.
	Timeout time.Duration
	// CheckSideEffect, when set, tells the kernel whether a call the
	// kernel started before it stopped (a crash) completed: the repaired
	// result then says "completed before the crash" or "did not run"
	// instead of "may or may not have run". It must only read, and must
	// answer SideEffectUnknown unless it is sure; detail says what it
	// checked. It is tool.SideEffectChecker's method; see docs/plugins.md.
	CheckSideEffect func(ctx context.Context, args json.RawMessage, since time.Time) (e SideEffect, detail string)
}

// SideEffect is what a CheckSideEffect found out; it is tool.SideEffect.
type SideEffect = tool.SideEffect

// The answers of a CheckSideEffect.
const (
	SideEffectUnknown   = tool.SideEffectUnknown
	SideEffectCompleted = tool.SideEffectCompleted
	SideEffectNotRun    = tool.SideEffectNotRun
)

// Handler runs one call. args is a JSON object that the kernel has
// validated against the tool's schema. A Handler must return once ctx is
// done.
type Handler func(ctx context.Context, args json.RawMessage) (Result, error)

// Tool is a tool a plugin serves. A Tool is also a tool.Tool (and so a
// kernel.Tool), so a test can call it directly; Call then checks that the
// arguments are a JSON object but not the schema: use sdktest, which
// validates as the kernel does. A Tool is safe for concurrent use if its
// handler is.
type Tool struct {
	spec    Spec
	handler Handler
	err     error // a bad spec; reported by Serve and by every Call
}

var emptySchema = `{"type":"object"}`

// NewTool returns a tool that runs h. A bad spec is not a panic: Serve
// reports it and exits, and Call returns it.
func NewTool(spec Spec, h Handler) *Tool {
	t := &Tool{spec: spec, handler: h}
	t.err = t.check()
	return t
}

func (t *Tool) check() error {
	s := t.spec
	if err := names.PluginToolName.Check(s.Name); err != nil {
		return fmt.Errorf("tool name %w", err)
	}
	if !s.Tier.Valid() {
		return fmt.Errorf("tool %s: tier %q is not one of read_only, side_effecting, privileged", s.Name, s.Tier)
	}
	if t.handler == nil {
		return fmt.Errorf("tool %s: no handler", s.Name)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("tool %s: negative timeout %s", s.Name, s.Timeout)
	}
	schema := s.Schema
	if len(bytes.TrimSpace([]byte(schema))) == 0 {
		schema = emptySchema
	}
	if err := checkSchema(schema); err != nil {
		return fmt.Errorf("tool %s: schema: %w", s.Name, err)
	}
	t.spec.Schema = schema
	return nil
}

// checkSchema is what the SDK checks of a schema without a JSON Schema
// library: it is one JSON object whose "type", if any, is "object". The
// kernel compiles it in full when it loads the plugin.
func checkSchema(schema string) error {
	var top map[string]any
	if err := json.Unmarshal([]byte(schema), &top); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if t, ok := top["type"]; ok && t != "object" {
		return fmt.Errorf("type must be \"object\" (tool arguments are a JSON object), got %v", t)
	}
	return nil
}

// Text returns a tool whose handler receives the validated arguments
// decoded into an A and returns the text the model reads.
func Text[A any](spec Spec, fn func(ctx context.Context, args A) (string, error)) *Tool {
	return NewTool(spec, func(ctx context.Context, raw json.RawMessage) (Result, error) {
		var a A
		if err := decodeArgs(raw, &a); err != nil {
			return Result{}, err
		}
		s, err := fn(ctx, a)
		return Result{Content: s}, err
	})
}

// JSON returns a tool whose handler receives the validated arguments decoded
// into an A and returns a value the SDK renders as JSON for the model.
func JSON[A, R any](spec Spec, fn func(ctx context.Context, args A) (R, error)) *Tool {
	return NewTool(spec, func(ctx context.Context, raw json.RawMessage) (Result, error) {
		var a A
		if err := decodeArgs(raw, &a); err != nil {
			return Result{}, err
		}
		r, err := fn(ctx, a)
		if err != nil {
			return Result{}, err
		}
		b, merr := json.Marshal(r)
		if merr != nil {
			return Result{}, fmt.Errorf("encode result as JSON: %w", merr)
		}
		return Result{Content: string(b)}, nil
	})
}

func decodeArgs(raw json.RawMessage, into any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return &Error{Code: CodeInvalidArgs, Message: "decode arguments: " + err.Error(), Err: err}
	}
	return nil
}

// Spec returns the tool's spec as the kernel sees it, without the plugin
// namespace (the host adds it) and with Source "sdk".
func (t *Tool) Spec() tool.Spec {
	return tool.Spec{
		Name:        t.spec.Name,
		Description: t.spec.Description,
		Schema:      json.RawMessage(t.spec.Schema),
		Tier:        t.spec.Tier,
		Tags:        append([]string(nil), t.spec.Tags...),
		Timeout:     t.spec.Timeout,
		Source:      "sdk",
	}
}

// CheckSideEffect runs the spec's CheckSideEffect: SideEffectUnknown when
// the tool has none, the arguments are not a JSON object, or the check
// panics. It makes a Tool a tool.SideEffectChecker.
func (t *Tool) CheckSideEffect(ctx context.Context, args json.RawMessage, since time.Time) (e SideEffect, detail string) {
	if t.err != nil || t.spec.CheckSideEffect == nil {
		return SideEffectUnknown, ""
	}
	if err := t.validate(args); err != nil {
		return SideEffectUnknown, ""
	}
	defer func() {
		if r := recover(); r != nil {
			e, detail = SideEffectUnknown, fmt.Sprintf("the check panicked: %v", r)
		}
	}()
	return t.spec.CheckSideEffect(ctx, args, since)
}

// Call checks that args are a JSON object and runs the handler, with the
// spec's timeout if it has one. A panic in the handler is recovered and
// returned as an error with code CodePanic carrying the panic value and the
// stack. Errors keep their *Error code; others get CodeToolError, or
// CodeTimeout / CodeCancelled when ctx ended the call.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (res Result, err error) {
	if t.err != nil {
		return Result{}, &Error{Code: CodeToolError, Message: t.err.Error(), Err: t.err}
	}
	if err := t.validate(args); err != nil {
		return Result{}, err
	}
	if t.spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.spec.Timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			res = Result{}
			err = &Error{Code: CodePanic, Message: panicText(r, debug.Stack())}
		}
	}()
	res, err = t.handler(ctx, args)
	if err == nil {
		return res, nil
	}
	var e *Error
	switch {
	case errors.As(err, &e):
	case endedByDeadline(ctx):
		err = &Error{Code: CodeTimeout, Message: err.Error(), Err: err}
	case ctx.Err() != nil:
		err = &Error{Code: CodeCancelled, Message: err.Error(), Err: err}
	}
	return res, err
}

func (t *Tool) validate(args json.RawMessage) error {
	var v any = map[string]any{}
	if len(bytes.TrimSpace(args)) > 0 {
		if err := json.Unmarshal(args, &v); err != nil {
			return &Error{Code: CodeInvalidArgs, Message: "arguments are not valid JSON: " + err.Error()}
		}
	}
	if _, ok := v.(map[string]any); !ok {
		return &Error{Code: CodeInvalidArgs, Message: "arguments must be a JSON object"}
	}
	return nil
}

// maxPanicStack bounds the stack trace a panic error carries.
const maxPanicStack = 2048

func panicText(r any, stack []byte) string {
	// Drop the frames of debug.Stack and of the recovery: the trace starts
	// at the frame that panicked.
	if i := bytes.Index(stack, []byte("\npanic(")); i >= 0 {
		rest := stack[i+1:]
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			rest = rest[j+1:] // the panic( line
			if k := bytes.IndexByte(rest, '\n'); k >= 0 {
				stack = rest[k+1:] // its file:line
			}
		}
	}
	if len(stack) > maxPanicStack {
		stack = append(stack[:maxPanicStack:maxPanicStack], "\n..."...)
	}
	return fmt.Sprintf("panic: %v\n\n%s", r, stack)
}

var _ tool.Tool = (*Tool)(nil)
