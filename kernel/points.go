package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// HookPoint is a place in the loop where hooks run: the five lifecycle
// points of a run, and the two of a tool call ("before" and "after",
// the phases of Config.Hooks).
type HookPoint string

// The hook points, in the order a run meets them.
const (
	// PointRunStart: the prompt, before it is stored. A hook may refuse
	// the run, rewrite the prompt or add context.
	PointRunStart HookPoint = "run_start"
	// PointBeforeCompact: before the history is summarised. A hook may
	// veto the compaction or add instructions for the summariser.
	PointBeforeCompact HookPoint = "before_compact"
	// PointBeforeModel: the exact request, before it is sent. A hook may
	// block it, add context or edit messages; a guardrail may run
	// concurrently with the model call.
	PointBeforeModel HookPoint = "before_model"
	// PointAfterModel: the answer, before anything acts on it or anyone
	// sees it. A hook may block it, change its text or refuse calls.
	PointAfterModel HookPoint = "after_model"
	// PointBeforeTool and PointAfterTool are the tool call's hooks
	// (Config.Hooks, Hook): before the policy decision, after the tool.
	PointBeforeTool HookPoint = "before"
	PointAfterTool  HookPoint = "after"
	// PointRunEnd: the final answer and the stop reason. A hook may
	// continue a completed run with a message (Config.MaxContinuations)
	// or annotate its end.
	PointRunEnd HookPoint = "run_end"
)

// hookPoints is every hook point, in the order a run meets them. It is
// the one list: the hook schemas' phase enums and dispatch, the
// configuration's phase enum and the points of docs/hooks.md are
// generated from it or held to it by tests (docs/architecture.md,
// "Closed sets").
var hookPoints = []HookPoint{PointRunStart, PointBeforeCompact, PointBeforeModel, PointAfterModel, PointBeforeTool, PointAfterTool, PointRunEnd}

// HookPoints returns every hook point, in the order a run meets them.
func HookPoints() []HookPoint { return slices.Clone(hookPoints) }

// Lifecycle reports whether p is a point of the run's lifecycle (Points)
// rather than of a tool call.
func (p HookPoint) Lifecycle() bool { return p != PointBeforeTool && p != PointAfterTool && p != "" }

// DefaultMaxContinuations bounds the run_end continuations of one run when
// Config.MaxContinuations is 0.
const DefaultMaxContinuations = 3

// Points are the hooks at the lifecycle points of the loop
// (Config.Points). The loop calls each where its point is; a nil field
// costs one nil check. package hooks builds Points from configuration and
// Go functions; a program may also set the fields itself.
//
// A hook's reply says what to do (see each reply type). An error
// returned by a point stops the run with StopGuardrail, as a hook that
// failed closed: a *GuardrailError names the hook, any other error is
// wrapped in one. The context's own error cancels the run. Points are
// called from the run's goroutine (Guard from one the loop owns) and must
// be safe for concurrent use by different runs.
type Points struct {
	RunStart      func(ctx context.Context, in *RunStartInput) (RunStartReply, error)
	BeforeCompact func(ctx context.Context, in *BeforeCompactInput) (BeforeCompactReply, error)
	BeforeModel   func(ctx context.Context, in *BeforeModelInput) (BeforeModelReply, error)
	AfterModel    func(ctx context.Context, in *AfterModelInput) (AfterModelReply, error)
	// HoldText is asked before each generation whether AfterModel may
	// change the answer's text. When it may, the answer is not streamed
	// (message.delta, reasoning.delta) until AfterModel has run, and then
	// comes as one delta of each kind, as AfterModel left it. Nil holds
	// whenever AfterModel is set.
	HoldText func() bool
	RunEnd   func(ctx context.Context, in *RunEndInput) (RunEndReply, error)
	// Active, when set, is asked as the loop reaches a point whose field
	// is set whether any hook is there now; false skips the point, its
	// input unbuilt (package hooks sets its points whether or not hooks
	// are configured there, so that a reload can add some). Nil: every
	// set field is called.
	Active func(HookPoint) bool
}

// at reports whether the loop calls the point p whose field is set: set
// tells whether it is.
func (ps *Points) at(p HookPoint, set bool) bool {
	return set && (ps.Active == nil || ps.Active(p))
}

// PointInfo places a lifecycle point's input; every input has it. The
// JSON fields are the same for every point (schemas/hook-input.schema.json).
type PointInfo struct {
	Point     HookPoint `json:"phase"`
	SessionID string    `json:"session_id"`
	// Run and Turn are the run (user prompt) and its turn (model
	// generation), both from 1; Turn is 0 at run_start.
	Run  int `json:"run"`
	Turn int `json:"turn"`
	// Principal names who started the run (RunOptions.Principal).
	Principal string `json:"principal,omitempty"`
	// Hooks are the verdicts of the points before this one in the turn
	// (run_start's for the whole run).
	Hooks HookVerdicts `json:"hooks"`

	st   *State
	emit func(Event)
}

// Info returns p: every input has it, through its PointInfo.
func (p *PointInfo) Info() *PointInfo { return p }

// State returns a copy of the run as policy sees it.
func (p *PointInfo) State() *State {
	if p.st == nil {
		return nil
	}
	s := *p.st
	return &s
}

// Emit sends an event on the run's event stream (hooks report their
// decisions with it). It is safe for concurrent use.
func (p *PointInfo) Emit(e Event) {
	if p.emit != nil {
		p.emit(e)
	}
}

// NewPointInfo builds the PointInfo of an input outside the loop (tests,
// a hook's own tooling); its events go to emit, which may be nil.
func NewPointInfo(p HookPoint, st *State, emit func(Event)) PointInfo {
	pi := PointInfo{Point: p, st: st, emit: emit}
	if st != nil {
		pi.SessionID, pi.Run, pi.Turn, pi.Hooks = st.SessionID, st.Run, st.Turn, st.Hooks
	}
	return pi
}

// RunStartInput is what a run_start hook sees: the prompt before it is
// stored.
type RunStartInput struct {
	PointInfo
	Prompt     string `json:"prompt"`
	NewSession bool   `json:"new_session"`
}

// RunStartReply is the run_start point's verdict. Block refuses the run
// (the prompt is stored with the refusal, left out of later requests);
// Prompt replaces the prompt (the replacement is stored and sent: the
// original is not kept); Context is added after the prompt as system
// messages, stored with it.
type RunStartReply struct {
	Block   *Block
	Prompt  *HookText
	Context []HookText
	// Failed names hooks that failed and stepped aside (fail_open).
	Failed []string
}

// BeforeModelInput is what a before_model hook sees: the request about to
// be sent. Messages must not be modified; a hook edits them through its
// reply.
type BeforeModelInput struct {
	PointInfo
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	// Tools are the tools offered (the policy's surface for this turn).
	Tools []string `json:"tools"`
	// Tokens is the request's estimated size and Window the model's
	// context window, both 0 without context accounting.
	Tokens int `json:"tokens"`
	Window int `json:"window"`
	// Budgets are the policy's budgets whose warn_when holds.
	Budgets []string `json:"budgets,omitempty"`
}

// BeforeModelReply is the before_model point's verdict. Block stops the
// run before the request is sent (StopGuardrail). Context is added at the
// end of the request as system messages and Edits replace the content of
// messages of it; both are stored with the answer, so every later
// request, a resumed session and a replay send the same bytes.
//
// Guard, when set, runs concurrently with the model call, on a goroutine
// the loop owns, over the request as sent: a Block in its reply (or an
// error, a failure) cancels the model call in flight and discards
// whatever it answered. The answer is not streamed or acted on before
// Guard has returned. Guard must return once its ctx is done.
type BeforeModelReply struct {
	Block   *Block
	Context []HookText
	Edits   []Edit
	Guard   func(ctx context.Context) (GuardReply, error)
	Failed  []string
}

// GuardReply is a concurrent guardrail's verdict: Block trips it; Failed
// names guardrails that failed and stepped aside (fail_open).
type GuardReply struct {
	Block  *Block
	Failed []string
}

// AfterModelInput is what an after_model hook sees: the answer, before it
// is stored, streamed (when held, see Points.HoldText) or acted on.
type AfterModelInput struct {
	PointInfo
	// Model is the model that answered.
	Model  string  `json:"model"`
	Answer Message `json:"answer"`
}

// AfterModelReply is the after_model point's verdict. Block discards the
// answer and stops the run (StopGuardrail). Text and Reasoning replace
// the answer's; only the replacement is stored, streamed and sent again.
// Refused calls are not run: each gets a denied result, so the model
// reads why and the history keeps every call paired with a result.
type AfterModelReply struct {
	Block     *Block
	Text      *HookText
	Reasoning *HookText
	Refused   []Refusal
	Failed    []string
}

// RunEndInput is what a run_end hook sees: how the run ends.
type RunEndInput struct {
	PointInfo
	StopReason StopReason `json:"stop_reason"`
	// Output is the final answer.
	Output string `json:"output"`
	// Calls are the run's calls with their outcomes, policy's and the
	// tools' verdicts.
	Calls []CallOutcome `json:"calls"`
	// Continuations counts the run's continuations so far, of at most
	// MaxContinuations.
	Continuations    int `json:"continuations"`
	MaxContinuations int `json:"max_continuations"`
}

// RunEndReply is the run_end point's verdict. Continue, for a run that
// completed, goes on with its text as the next user message (stored,
// counted in State.Continuations, bounded by Config.MaxContinuations).
// Notes annotate the run's end (RunResult.Notes, run.completed).
type RunEndReply struct {
	Continue *HookText
	Notes    []HookText
	Failed   []string
}

// BeforeCompactInput is what a before_compact hook sees: a summary of the
// oldest part of the history is about to be written.
type BeforeCompactInput struct {
	PointInfo
	// Forced is true for `kernel compact` (Kernel.Compact).
	Forced bool `json:"forced"`
	// Messages counts the messages the summary would replace; Tokens is
	// the request's size before and Window the model's context window.
	Messages int `json:"messages"`
	Tokens   int `json:"tokens"`
	Window   int `json:"window"`
}

// BeforeCompactReply is the before_compact point's verdict. Block vetoes
// the compaction (the request leaves old exchanges out instead, or
// Kernel.Compact fails); Instructions are added to the summariser's
// instruction and stored in the compaction record.
type BeforeCompactReply struct {
	Block        *Block
	Instructions []HookText
	Failed       []string
}

// Block is a hook refusing at a lifecycle point.
type Block struct {
	Hook string `json:"hook"`
	// Point is set by the loop.
	Point  HookPoint `json:"phase,omitempty"`
	Reason string    `json:"reason"`
	// Concurrent is true for a guardrail that ran beside the model call.
	Concurrent bool `json:"concurrent,omitempty"`
}

// HookText is text a hook added or wrote, with the hook's name.
type HookText struct {
	Hook string `json:"hook"`
	Text string `json:"text"`
}

// Edit is a hook's replacement of the content of a message of a request,
// by its sequence number.
type Edit struct {
	Hook    string `json:"hook"`
	Seq     uint64 `json:"seq"`
	Content string `json:"content"`
}

// Refusal is an after_model hook refusing one of the answer's calls.
type Refusal struct {
	Hook   string `json:"hook"`
	CallID string `json:"call_id"`
	Reason string `json:"reason"`
}

// ErrGuardrail is matched (errors.Is) by every *GuardrailError.
var ErrGuardrail = errors.New("stopped by a hook")

// GuardrailError is a run stopped by a hook at a lifecycle point: a
// block, or a hook that failed closed (Err set). A block ends the run
// with StopGuardrail and no error (RunResult.Guardrail); a failure ends
// it with StopGuardrail and this error.
type GuardrailError struct {
	Hook   string
	Point  HookPoint
	Reason string
	// Concurrent is true for a guardrail that ran beside the model call.
	Concurrent bool
	Err        error
}

func (e *GuardrailError) Error() string {
	name := "a hook"
	if e.Hook != "" {
		name = fmt.Sprintf("hook %q", e.Hook)
	}
	if e.Err != nil {
		return fmt.Sprintf("%s (%s) failed: %v", name, e.Point, e.Err)
	}
	return fmt.Sprintf("stopped by %s (%s): %s", name, e.Point, e.Reason)
}

// Unwrap returns the failure, if any.
func (e *GuardrailError) Unwrap() error { return e.Err }

// Is reports that every GuardrailError is ErrGuardrail.
func (e *GuardrailError) Is(target error) bool { return target == ErrGuardrail }

// HookVerdicts are the verdicts of the lifecycle points in the current
// turn (run_start's and run_end's: in the current run), as policy and
// later hooks see them: State.Hooks, the hooks input field, and
// hooks.<point>.<field> in policy and hook expressions (the expr tags),
// and a policy test input's hooks section (the yaml tags).
type HookVerdicts struct {
	RunStart      PointVerdict `json:"run_start" yaml:"run_start" expr:"run_start"`
	BeforeCompact PointVerdict `json:"before_compact" yaml:"before_compact" expr:"before_compact"`
	BeforeModel   PointVerdict `json:"before_model" yaml:"before_model" expr:"before_model"`
	AfterModel    PointVerdict `json:"after_model" yaml:"after_model" expr:"after_model"`
	RunEnd        PointVerdict `json:"run_end" yaml:"run_end" expr:"run_end"`
}

// PointVerdict is what the hooks at one point did.
type PointVerdict struct {
	// Blocked: a hook blocked (for run_end: continued the run).
	Blocked bool `json:"blocked" yaml:"blocked" expr:"blocked"`
	// Changed: a hook changed something (context, an edit, the prompt,
	// the answer, instructions, a note).
	Changed bool `json:"changed" yaml:"changed" expr:"changed"`
	// Failed: a hook failed and stepped aside (fail_open).
	Failed bool `json:"failed" yaml:"failed" expr:"failed"`
	// Refused counts the calls an after_model hook refused.
	Refused int `json:"refused" yaml:"refused" expr:"refused"`
	// Hooks names the hooks that did any of it, in order.
	Hooks []string `json:"hooks,omitempty" yaml:"hooks" expr:"hooks"`
}

// of returns the verdict of point p, nil for a tool call's point.
func (v *HookVerdicts) of(p HookPoint) *PointVerdict {
	switch p {
	case PointRunStart:
		return &v.RunStart
	case PointBeforeCompact:
		return &v.BeforeCompact
	case PointBeforeModel:
		return &v.BeforeModel
	case PointAfterModel:
		return &v.AfterModel
	case PointRunEnd:
		return &v.RunEnd
	}
	return nil
}

// note adds hook's doing to the verdict.
func (pv *PointVerdict) note(hook, what string) {
	switch what {
	case NoteBlocked, NoteContinued:
		pv.Blocked = true
	case NoteFailed:
		pv.Failed = true
	case NoteRefused:
		pv.Refused++
		pv.Changed = true
	default:
		pv.Changed = true
	}
	if hook != "" && !slices.Contains(pv.Hooks, hook) {
		pv.Hooks = append(pv.Hooks, hook)
	}
}
