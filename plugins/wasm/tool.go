package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/sys"

	"github.com/agentkernel/agentkernel/kernel"
	toolpkg "github.com/agentkernel/agentkernel/tool"
)

// tool is one tool of a loaded module. Every call runs in a fresh instance,
// so a tool is safe for concurrent use.
type tool struct {
	m    *module
	spec kernel.ToolSpec
	def  *manifestTool
}

func newTool(m *module, def *manifestTool) *tool {
	spec := kernel.ToolSpec{
		Name:        def.Name,
		Description: def.Description,
		Schema:      def.Schema,
		Tier:        def.Tier,
		Tags:        slices.Clone(def.Tags),
		Timeout:     m.eff.timeout,
		Source:      "wasm:" + m.name,
	}
	return &tool{m: m, spec: spec, def: def}
}

// Spec implements kernel.Tool.
func (t *tool) Spec() kernel.ToolSpec { return t.spec }

// Call implements kernel.Tool: it runs the call in a fresh instance (a
// pre-warmed one for pooled reactor modules) bounded by the module's
// timeout and ctx, and returns the guest's result. A guest that fails
// (non-zero exit, trap, deadline, output over the limit) yields a
// *kernel.ToolError whose message carries the start and end of its stderr.
//
// The time a call waits in the host's queues (the module's call slots, its
// load, the host's run slots and memory budget, a fresh instance when the
// pool has none) is the host's, not the tool's: the module's timeout starts
// when the guest does, and the wait is reported through tool.Queue, so that
// the kernel bounds it by its own queue limit instead of the tool's
// timeout. Without a kernel, only ctx bounds the wait.
func (t *tool) Call(ctx context.Context, args json.RawMessage) (kernel.Result, error) {
	h := t.m.h
	if !h.enter() {
		return kernel.Result{}, t.fail("closed", ErrClosed)
	}
	defer h.leave()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(h.life, func() { cancel(ErrClosed) })
	defer stop()

	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	q := &queued{ctx: ctx, start: toolpkg.Queue(ctx), timeout: t.m.timeoutOf()}
	defer q.end()
	// Queue for the module's max_concurrency and for its compiled code.
	if t.m.slots != nil {
		select {
		case t.m.slots <- struct{}{}:
			defer func() { <-t.m.slots }()
		case <-ctx.Done():
			return t.waitFailed(ctx, fmt.Sprintf("waiting for one of the %d call slots of module %s (max_concurrency)", cap(t.m.slots), t.m.name))
		}
	}
	if err := t.m.ready(ctx); err != nil {
		if ctx.Err() != nil {
			return t.waitFailed(ctx, "waiting for module "+t.m.name+" to load (compiling, or reading the compilation cache)")
		}
		return kernel.Result{Content: err.Error(), IsError: true}, t.fail("unavailable", err)
	}
	// And for one of the host's run slots, so that the deadlines of
	// running calls are noticed on time (see DefaultMaxRunning).
	select {
	case h.running <- struct{}{}:
		defer func() { <-h.running }()
	case <-ctx.Done():
		return t.waitFailed(ctx, fmt.Sprintf("waiting for one of the host's %d run slots (limits.wasm_max_running)", cap(h.running)))
	}
	switch t.m.abi {
	case ABIReactor:
		return t.callReactor(q, args)
	case ABIArgv:
		return t.callArgv(q, args)
	default:
		return t.callJSON(q, args)
	}
}

// queued is a call while it waits in the host's queues, and begin starts
// its guest: from then on the module's timeout runs.
type queued struct {
	ctx     context.Context // the wait's: the caller's, and the host's closing
	start   func()          // tool.Queue's
	timeout time.Duration
	stops   []func()
}

// begin ends the wait: the tool's timeout starts now. It returns the
// context of the guest's run and the function that stops the guest with a
// cause (an output or memory limit).
func (q *queued) begin() (context.Context, context.CancelCauseFunc) {
	q.start()
	ctx, cancelTimeout := context.WithTimeout(q.ctx, q.timeout)
	ctx, cancel := context.WithCancelCause(ctx)
	q.stops = append(q.stops, cancelTimeout, func() { cancel(nil) })
	return ctx, cancel
}

func (q *queued) end() {
	for _, f := range q.stops {
		f()
	}
}

// waitFailed is a call whose deadline or cancellation came while it was
// still waiting to start.
func (t *tool) waitFailed(ctx context.Context, what string) (kernel.Result, error) {
	err := stoppedError(ctx, &instanceIO{})
	var ge *guestError
	if errors.As(err, &ge) {
		ge.msg += " while " + what
	}
	return kernel.Result{Content: err.Error(), IsError: true}, t.wrap(err)
}

// request is what json and reactor modules receive.
type request struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

func (t *tool) request(args json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(request{Tool: t.spec.Name, Args: args})
	if err != nil {
		return nil, t.fail("invalid_args", fmt.Errorf("%w: %v", kernel.ErrInvalidArgs, err))
	}
	return b, nil
}

// callJSON runs a command module with the request on stdin.
func (t *tool) callJSON(q *queued, args json.RawMessage) (kernel.Result, error) {
	req, err := t.request(args)
	if err != nil {
		return kernel.Result{}, err
	}
	ch, err := t.m.reserve(q.ctx)
	if err != nil {
		return kernel.Result{Content: err.Error(), IsError: true}, t.wrap(err)
	}
	ctx, cancel := q.begin()
	x := newInstanceIO(t.m.eff.maxOutput)
	x.attach(ctx, cancel)
	in, err := t.m.instantiate(ctx, ch, x, bytes.NewReader(req), []string{t.m.name})
	if in != nil {
		in.overflowed = stackOverflow(err)
		in.close()
	}
	if err := describeExit(ctx, err, x, "run"); err != nil {
		return kernel.Result{Content: err.Error(), IsError: true}, t.wrap(err)
	}
	return parseResult(x.output()), nil
}

// parseResult reads a json-ABI result: {"content": "...", "is_error": b}
// exactly, or else the whole of stdout as plain text.
func parseResult(out []byte) kernel.Result {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var r struct {
			Content *string `json:"content"`
			IsError bool    `json:"is_error"`
		}
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err == nil && r.Content != nil && !dec.More() {
			return kernel.Result{Content: validUTF8(*r.Content), IsError: r.IsError}
		}
	}
	return kernel.Result{Content: validUTF8(string(out))}
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// describeExit turns how an instance ended into an error, nil for success.
// A limit the guest went over fails the call even if the guest then exited
// cleanly: its output would be truncated. ctx is the call's; its cause says
// why the host stopped the guest.
func describeExit(ctx context.Context, err error, x *instanceIO, verb string) error {
	if cause := x.cause(); cause != nil {
		// The host stopped the guest (output or memory over its limit);
		// whatever the guest did afterwards (exit 2 on out of memory,
		// say) is a consequence.
		return &guestError{code: limitCode(cause), msg: cause.Error(), err: cause, stderr: x.stderrSummary()}
	}
	if err == nil {
		return nil
	}
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		switch ee.ExitCode() {
		case 0:
			return nil
		case sys.ExitCodeDeadlineExceeded, sys.ExitCodeContextCanceled:
			return stoppedError(ctx, x)
		}
		return &guestError{code: "exit", msg: fmt.Sprintf("module exited with code %d", ee.ExitCode()), stderr: x.stderrSummary()}
	}
	if ctx.Err() != nil {
		return stoppedError(ctx, x)
	}
	return &guestError{code: "trap", msg: fmt.Sprintf("%s module: %s", verb, firstLines(err.Error(), 12)), stderr: x.stderrSummary()}
}

// stoppedError says why the host stopped a guest.
func stoppedError(ctx context.Context, x *instanceIO) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrClosed):
		return &guestError{code: "cancelled", msg: "stopped: the WASM host is closing", err: ErrClosed}
	case errors.Is(cause, context.DeadlineExceeded):
		return &guestError{code: "timeout", msg: "stopped at its deadline", err: kernel.ErrToolTimeout, stderr: x.stderrSummary()}
	case cause != nil && !errors.Is(cause, context.Canceled):
		// e.g. the initialisation timeout's own cause
		return &guestError{code: "timeout", msg: cause.Error(), err: kernel.ErrToolTimeout, stderr: x.stderrSummary()}
	}
	return &guestError{code: "cancelled", msg: "cancelled", err: kernel.ErrCancelled}
}

func limitCode(err error) string {
	if errors.Is(err, ErrMemoryLimit) {
		return "memory_limit"
	}
	return "output_limit"
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

// guestError is a call the guest did not complete.
type guestError struct {
	code   string // the kernel.ToolError code
	msg    string
	err    error // a sentinel to match with errors.Is, or nil
	stderr string
}

func (e *guestError) Error() string {
	s := e.msg
	if st := strings.TrimSpace(e.stderr); st != "" {
		s += "\nstderr:\n" + st
	}
	return s
}

func (e *guestError) Unwrap() error { return e.err }

func (t *tool) wrap(err error) error {
	code := "tool_error"
	var ge *guestError
	if errors.As(err, &ge) {
		code = ge.code
	}
	return &kernel.ToolError{Tool: t.spec.Name, Code: code, Err: err}
}

func (t *tool) fail(code string, err error) error {
	return &kernel.ToolError{Tool: t.spec.Name, Code: code, Err: err}
}

// Capabilities describes what a WASM tool was granted, for `kernel tools`,
// e.g. "fs=/data:ro env=TZ clock memory=64MiB timeout=5s output=1MiB". The
// bool is false when t is not a tool of this package.
func Capabilities(t kernel.Tool) (string, bool) {
	wt, ok := t.(*tool)
	if !ok {
		return "", false
	}
	return wt.m.capDesc, true
}

var _ kernel.Tool = (*tool)(nil)
