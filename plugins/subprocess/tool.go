package subprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// Limits on what a plugin may send back besides its result.
const (
	maxProgressText  = 1 << 10
	maxProgressCalls = 1000
	// markerSlack is room for the truncation marker a plugin adds after
	// cutting its output to the cap.
	markerSlack = 128
	// crashWait is how long a failed call waits for the process to be seen
	// dead before it reports a plain transport error.
	crashWait = 2 * time.Second
	// deadlineSkew is how close to its deadline a call that failed is
	// taken to have failed because of it.
	deadlineSkew = 100 * time.Millisecond
)

// pluginTool is one tool of a subprocess plugin, as the kernel sees it.
// Safe for concurrent use.
type pluginTool struct {
	sup     *supervisor
	remote  toolSpec // as registered, without the namespace
	spec    kernel.ToolSpec
	timeout time.Duration // enforced by the host; zero leaves it to ctx
}

func (t *pluginTool) Spec() kernel.ToolSpec { return t.spec }

// Call runs the tool in the plugin process, starting it if needed. Progress
// reports are passed on through kernel.ReportProgress. Errors are
// *kernel.ToolError values: the plugin's own errors keep their code (and
// are *sdk.Error values, so errors.Is works with sdk's sentinels); a crash
// wraps ErrCrashed and carries the plugin's panic text; an open circuit
// breaker wraps ErrUnavailable; a call still running at its deadline gets
// the plugin killed and wraps kernel.ErrToolTimeout.
func (t *pluginTool) Call(ctx context.Context, args json.RawMessage) (kernel.Result, error) {
	s := t.sup
	name := t.spec.Name
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	inst, err := s.acquire(ctx)
	if err != nil {
		return kernel.Result{}, t.acquireError(ctx, err)
	}
	if live, ok := inst.byName[t.remote.Name]; !ok || !live.equal(t.remote) {
		return kernel.Result{}, toolError(name, sdk.CodeUnavailable, fmt.Errorf(
			"%w: plugin %s no longer offers %s as it was registered (its binary's tool list changed); restart the kernel",
			ErrUnavailable, s.cfg.Name, name))
	}
	sctx, cancel := context.WithCancel(withDeadline(withTraceContext(ctx)))
	defer cancel()
	stream, err := inst.rpc.Call(sctx, &pluginpb.CallRequest{
		Tool: t.remote.Name, Args: args, MaxOutputBytes: int64(s.cfg.MaxOutputBytes),
	})
	if err != nil {
		return kernel.Result{}, t.streamError(ctx, inst, err)
	}
	progress := 0
	for {
		ev, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errors.New("the plugin ended the call without a result")
			}
			return kernel.Result{}, t.streamError(ctx, inst, err)
		}
		switch e := ev.GetEvent().(type) {
		case *pluginpb.CallEvent_Progress:
			if progress++; progress <= maxProgressCalls {
				kernel.ReportProgress(ctx, cut(e.Progress.GetText(), maxProgressText))
			}
		case *pluginpb.CallEvent_Result:
			s.answered()
			if spans := e.Result.GetSpans(); len(spans) > 0 && s.h.cfg.OnSpans != nil {
				s.h.cfg.OnSpans(ctx, s.cfg.Name, spans)
			}
			return t.result(e.Result)
		}
	}
}

// maxSideEffectDetail caps the detail of a plugin's CheckSideEffect
// answer, which goes into the session as part of a result.
const maxSideEffectDetail = 1 << 10

// CheckSideEffect asks the plugin whether an interrupted call completed
// (kernel.SideEffectChecker), starting the plugin if needed. A tool whose
// spec does not say it checks, a plugin that fails to answer, and anything
// but a known answer are kernel.SideEffectUnknown: the call may or may not
// have run, as without a checker.
func (t *pluginTool) CheckSideEffect(ctx context.Context, args json.RawMessage, since time.Time) (kernel.SideEffect, string) {
	if !t.remote.ChecksSideEffects {
		return kernel.SideEffectUnknown, ""
	}
	inst, err := t.sup.acquire(ctx)
	if err != nil {
		return kernel.SideEffectUnknown, ""
	}
	if live, ok := inst.byName[t.remote.Name]; !ok || !live.equal(t.remote) {
		return kernel.SideEffectUnknown, ""
	}
	resp, err := inst.rpc.CheckSideEffect(ctx, &pluginpb.CheckSideEffectRequest{
		Tool: t.remote.Name, Args: args, SinceUnixNano: since.UnixNano(),
	})
	if err != nil {
		t.sup.log.Warn("plugin did not answer whether an interrupted call ran", "tool", t.spec.Name, "error", err)
		return kernel.SideEffectUnknown, ""
	}
	detail := cut(resp.GetDetail(), maxSideEffectDetail)
	switch resp.GetEffect() {
	case pluginpb.SideEffect_SIDE_EFFECT_COMPLETED:
		return kernel.SideEffectCompleted, detail
	case pluginpb.SideEffect_SIDE_EFFECT_NOT_RUN:
		return kernel.SideEffectNotRun, detail
	}
	return kernel.SideEffectUnknown, ""
}

// result turns the plugin's result into the kernel's, enforcing the
// output cap again (the plugin is not trusted to).
func (t *pluginTool) result(r *pluginpb.Result) (kernel.Result, error) {
	max := t.sup.cfg.MaxOutputBytes
	content := r.GetContent()
	if len(content) > max+markerSlack {
		content = sdk.TruncateOutput(content, max)
	}
	res := kernel.Result{Content: content, IsError: r.GetIsError()}
	e := r.GetError()
	if e == nil {
		return res, nil
	}
	code := e.GetCode()
	if !codeRE.MatchString(code) {
		code = sdk.CodeToolError
	}
	msg := e.GetMessage()
	if len(msg) > max+markerSlack {
		msg = sdk.TruncateOutput(msg, max)
	}
	res.IsError = true
	return res, toolError(t.spec.Name, code, &sdk.Error{Code: code, Message: msg, Err: kernelSentinel(code)})
}

var codeRE = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// kernelSentinel maps the standard codes onto the kernel's sentinels, so
// that errors.Is(err, kernel.ErrInvalidArgs) holds for a plugin's
// invalid_args error too.
func kernelSentinel(code string) error {
	switch code {
	case sdk.CodeInvalidArgs:
		return kernel.ErrInvalidArgs
	case sdk.CodeTimeout:
		return kernel.ErrToolTimeout
	case sdk.CodeCancelled:
		return kernel.ErrCancelled
	case sdk.CodeUnknownTool:
		return kernel.ErrUnknownTool
	}
	return nil
}

// acquireError explains a call that got no process: the caller gave up,
// the circuit breaker is open, the host is closed, or the start failed.
func (t *pluginTool) acquireError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return t.ctxError(ctx)
	}
	if errors.Is(err, ErrUnavailable) {
		err = fmt.Errorf("plugin %s: %w", t.sup.cfg.Name, err)
	}
	return toolError(t.spec.Name, sdk.CodeUnavailable, err)
}

func (t *pluginTool) ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return toolError(t.spec.Name, sdk.CodeTimeout, fmt.Errorf("%w: %s did not finish before its deadline", kernel.ErrToolTimeout, t.spec.Name))
	}
	return toolError(t.spec.Name, sdk.CodeCancelled, kernel.ErrCancelled)
}

// streamError explains a call that ended without a result: the deadline
// (the plugin is killed), cancellation, an oversized message, or the
// process dying (a crash, with its panic text).
func (t *pluginTool) streamError(ctx context.Context, inst *instance, err error) error {
	s := t.sup
	name := t.spec.Name
	if pastDeadline(ctx) {
		// The call may still be running in the plugin, holding
		// resources; only killing the process group is sure to stop it.
		s.drop(inst)
		inst.kill(fmt.Sprintf("%s exceeded its deadline", name))
		s.log.Warn("killed the plugin: a call exceeded its deadline", "tool", name, "pid", inst.runner.pid)
		return toolError(name, sdk.CodeTimeout, fmt.Errorf(
			"%w: %s did not finish before its deadline; plugin %s was killed and starts again on the next call",
			kernel.ErrToolTimeout, name, s.cfg.Name))
	}
	if ctx.Err() != nil {
		return t.ctxError(ctx)
	}
	if status.Code(err) == codes.ResourceExhausted {
		return toolError(name, "output_too_large", fmt.Errorf(
			"plugin %s sent a message larger than its max_output_bytes (%d) allows: %v", s.cfg.Name, s.cfg.MaxOutputBytes, status.Convert(err).Message()))
	}
	if inst.waitExited(crashWait) {
		reason, crash := inst.status()
		if reason != "" {
			return toolError(name, sdk.CodeUnavailable, fmt.Errorf("%w: plugin %s was stopped during the call: %s", ErrUnavailable, s.cfg.Name, reason))
		}
		if crash == "" {
			crash = "it exited without a word on stderr"
		}
		return toolError(name, "crashed", fmt.Errorf("%w during the call: plugin %s died; it restarts on the next call\n%s", ErrCrashed, s.cfg.Name, crash))
	}
	return toolError(name, sdk.CodeToolError, fmt.Errorf("call plugin %s: %s", s.cfg.Name, status.Convert(err).Message()))
}

// pastDeadline reports whether a call that failed with ctx failed because
// its deadline came: ctx ended with DeadlineExceeded, or its deadline has
// passed. The plugin's side of the stream may see the deadline first (it
// was sent along), so a failure within deadlineSkew of it waits for ours.
// A passed deadline counts even while ctx.Err() is still nil: on a loaded
// machine the context's timer can run later than the plugin's answer
// arrives, and the call is then still a timeout (its plugin killed), not
// a plain transport error.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	if ok && ctx.Err() == nil && time.Until(dl) < deadlineSkew {
		timer := time.NewTimer(time.Until(dl) + deadlineSkew)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
	}
	if err := ctx.Err(); err != nil {
		return errors.Is(err, context.DeadlineExceeded)
	}
	return ok && !time.Now().Before(dl)
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

var _ kernel.Tool = (*pluginTool)(nil)
