package hooks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// PointInput is the input of a hook at a lifecycle point: one of
// *kernel.RunStartInput, *kernel.BeforeCompactInput,
// *kernel.BeforeModelInput, *kernel.AfterModelInput or
// *kernel.RunEndInput. A hook must not modify it: it answers with a
// Reply.
type PointInput interface {
	Info() *kernel.PointInfo
}

// Reply is what a hook at a lifecycle point answers. Go hooks return it;
// command hooks and plugin hooks write it as JSON
// (schemas/hook-output.schema.json, the point's $defs entry). The zero
// Reply allows, changing nothing. Which fields a point takes is
// ReplyFields; any other is a failure of the hook.
type Reply struct {
	// Decision is "allow" (or empty) or "block": at run_start block
	// refuses the run, at before_model it blocks the request, at
	// after_model the answer, at before_compact it vetoes the
	// compaction, and at run_end it does not let a completed run end:
	// the run goes on with Reason as the next user message.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Prompt (run_start) replaces the prompt.
	Prompt *string `json:"prompt,omitempty"`
	// Context (run_start, before_model) is added as a system message,
	// stored, and sent again in every later request.
	Context string `json:"context,omitempty"`
	// Edits (before_model) replace the content of stored messages of the
	// request, by seq, in this request and every later one.
	Edits []EditReply `json:"edits,omitempty"`
	// Text and Reasoning (after_model) replace the answer's.
	Text      *string `json:"text,omitempty"`
	Reasoning *string `json:"reasoning,omitempty"`
	// Refuse (after_model) names calls of the answer not to run.
	Refuse []RefuseReply `json:"refuse,omitempty"`
	// Note (run_end) annotates the run's end.
	Note string `json:"note,omitempty"`
	// Instructions (before_compact) are added to the summariser's.
	Instructions string `json:"instructions,omitempty"`

	// what names the change in hook.rewrote when a built-in kind says it
	// better ("redacted").
	what string
}

// EditReply replaces the content of the stored message Seq.
type EditReply struct {
	Seq     uint64 `json:"seq"`
	Content string `json:"content"`
}

// RefuseReply refuses the answer's call CallID.
type RefuseReply struct {
	CallID string `json:"call_id"`
	Reason string `json:"reason,omitempty"`
}

// The decisions of a Reply.
const (
	Allow = "allow"
	Block = "block"
)

// ReplyFields returns the JSON fields of a Reply that the hooks at point
// may set (decision and reason at every point); nil for a tool call's
// points, whose hooks answer with Verdict (Output for command hooks).
func ReplyFields(point kernel.HookPoint) []string {
	f, ok := replyFields[point]
	if !ok {
		return nil
	}
	return slices.Clone(f)
}

var replyFields = map[kernel.HookPoint][]string{
	kernel.PointRunStart:      {"decision", "reason", "prompt", "context"},
	kernel.PointBeforeCompact: {"decision", "reason", "instructions"},
	kernel.PointBeforeModel:   {"decision", "reason", "context", "edits"},
	kernel.PointAfterModel:    {"decision", "reason", "text", "reasoning", "refuse"},
	kernel.PointRunEnd:        {"decision", "reason", "note"},
}

// check returns an error naming the first field rep sets that point does
// not take.
func (rep *Reply) check(point kernel.HookPoint) error {
	set := map[string]bool{
		"prompt": rep.Prompt != nil, "context": rep.Context != "", "edits": rep.Edits != nil,
		"text": rep.Text != nil, "reasoning": rep.Reasoning != nil, "refuse": rep.Refuse != nil,
		"note": rep.Note != "", "instructions": rep.Instructions != "",
	}
	allowed := replyFields[point]
	for _, f := range []string{"prompt", "context", "edits", "text", "reasoning", "refuse", "note", "instructions"} {
		if set[f] && !slices.Contains(allowed, f) {
			return fmt.Errorf("a %s hook cannot reply %s (it may set %v)", point, f, allowed)
		}
	}
	switch rep.Decision {
	case "", Allow, Block:
	default:
		return fmt.Errorf("decision must be allow or block, got %q", rep.Decision)
	}
	return nil
}

// PointFunc is a hook at a lifecycle point written in Go. An error is a
// failure of the hook, handled by its failure mode; fn should return
// once ctx is done (the run waits for it).
type PointFunc func(ctx context.Context, in PointInput) (Reply, error)

// PointHook is one hook at a lifecycle point, of any kind: a Go function
// (At), or a rule of the configuration. It is immutable and safe for
// concurrent use.
type PointHook struct {
	name       string
	point      kernel.HookPoint
	match      *Matcher
	failOpen   bool
	concurrent bool
	timeout    time.Duration
	fn         PointFunc
}

// At returns a Go hook named name at the lifecycle point point. Options:
// When, Fail, Concurrent (before_model only) and Timeout.
func At(point kernel.HookPoint, name string, fn PointFunc, opts ...Option) (*PointHook, error) {
	if !point.Lifecycle() {
		return nil, fmt.Errorf("hook %q: %q is not a lifecycle point (want one of %v; tool hooks are Before and After)", name, point, lifecycle())
	}
	h := &hook{name: name}
	for _, o := range opts {
		o(h)
	}
	if h.concurrent && point != kernel.PointBeforeModel {
		return nil, fmt.Errorf("hook %q: only a before_model hook runs concurrently with the model call", name)
	}
	return &PointHook{name: name, point: point, match: h.match, failOpen: h.failOpen, concurrent: h.concurrent, timeout: h.timeout, fn: fn}, nil
}

// Concurrent runs a before_model hook beside the model call, as a
// guardrail: its block cancels the call in flight and discards the
// answer; it can only block.
func Concurrent() Option { return func(h *hook) { h.concurrent = true } }

// Timeout bounds one run of the hook; its ctx ends then, and a hook that
// did not answer has failed.
func Timeout(d time.Duration) Option { return func(h *hook) { h.timeout = d } }

// lifecycle lists the lifecycle points.
func lifecycle() []kernel.HookPoint {
	return slices.DeleteFunc(kernel.HookPoints(), func(p kernel.HookPoint) bool { return !p.Lifecycle() })
}

// Name returns the hook's name; Point its point.
func (h *PointHook) Name() string            { return h.name }
func (h *PointHook) Point() kernel.HookPoint { return h.point }

// runOne runs h once on in. ok is false when its matcher did not select
// in. A failure (err) is the hook's: its matcher erred, it failed, timed
// out, or answered what its point does not take.
func (h *PointHook) runOne(ctx context.Context, in PointInput) (rep Reply, ok bool, err error) {
	if h.match != nil {
		env := pointEnv(in)
		ok, err := h.match.Match(env)
		releaseEnv(env)
		if err != nil {
			return Reply{}, true, fmt.Errorf("match %q: %w", h.match.src, err)
		}
		if !ok {
			return Reply{}, false, nil
		}
	}
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	rep, err = h.fn(ctx, in)
	if err == nil && ctx.Err() != nil && h.timeout > 0 {
		err = fmt.Errorf("no answer within %s", h.timeout)
	}
	if err != nil {
		return Reply{}, true, err
	}
	if err := rep.check(h.point); err != nil {
		return Reply{}, true, err
	}
	return rep, true, nil
}

// outcome is what a hook's run came to, for hook.completed.
func (rep *Reply) outcome() string {
	switch {
	case rep.Decision == Block:
		return "blocked"
	case rep.Prompt != nil || rep.Context != "" || rep.Edits != nil || rep.Text != nil || rep.Reasoning != nil ||
		rep.Refuse != nil || rep.Note != "" || rep.Instructions != "":
		return "changed"
	}
	return "allowed"
}

// completed reports a hook's run.
func (h *PointHook) completed(in PointInput, outcome string, start time.Time) {
	pi := in.Info()
	pi.Emit(kernel.HookCompleted{Hook: h.name, Phase: string(h.point), Turn: pi.Turn, Outcome: outcome,
		Duration: time.Since(start), Concurrent: h.concurrent})
}

// failed applies h's failure mode to err: nil when the hook steps aside
// (fail_open), else the *kernel.GuardrailError that stops the run.
func (h *PointHook) failed(ctx context.Context, in PointInput, err error, start time.Time) error {
	if ctx.Err() != nil && !h.concurrent {
		return ctx.Err()
	}
	pi := in.Info()
	pi.Emit(kernel.HookFailed{Hook: h.name, Phase: string(h.point), Error: err.Error(), FailOpen: h.failOpen})
	h.completed(in, "failed", start)
	if h.failOpen {
		return nil
	}
	return &kernel.GuardrailError{Hook: h.name, Point: h.point, Err: err, Concurrent: h.concurrent}
}
