package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// StopReason says why a run ended.
type StopReason string

// The stop reasons. A budget stop is "budget:<id>" (see BudgetStop).
const (
	StopCompleted        StopReason = "completed"
	StopMaxTurns         StopReason = "max_turns"
	StopCancelled        StopReason = "cancelled"
	StopAwaitingApproval StopReason = "awaiting_approval"
	StopError            StopReason = "error"
	// StopInterrupted ends a run that was asked to stop at its next step
	// boundary (RunOptions.Interrupt): everything before the boundary is
	// stored, the session keeps status running, and Continue resumes it.
	StopInterrupted StopReason = "interrupted"
	// StopEmptyResponse ends a run whose model answered with nothing, even
	// when asked again (ErrEmptyResponse).
	StopEmptyResponse StopReason = "empty_response"
	// StopToolProtocol ends a run whose model broke the text tool
	// protocol again after a correction, or more often than
	// Config.MaxCorrections (ErrToolProtocol).
	StopToolProtocol StopReason = "tool_protocol"
	// StopMaxDepth ends a child run that would go deeper than
	// Config.MaxDepth (an agent calling agents calling agents): it stops
	// before its first model call, and its caller reads why.
	StopMaxDepth StopReason = "max_depth"
	// StopGuardrail ends a run a hook at a lifecycle point refused or
	// blocked (RunResult.Blocked), or one such hook that failed closed
	// (the run's error is then a *GuardrailError naming it).
	StopGuardrail StopReason = "guardrail"
)

// stopReasons is every stop reason but a budget stop, in the order the
// docs name them. It is the one list: schemas/events.schema.json and the
// stop reasons of docs/architecture.md are held to it by tests
// (docs/architecture.md, "Closed sets").
var stopReasons = []StopReason{StopCompleted, StopMaxTurns, StopAwaitingApproval, StopCancelled, StopInterrupted, StopError, StopEmptyResponse, StopToolProtocol, StopGuardrail, StopMaxDepth}

// StopReasons returns every stop reason but a budget stop (BudgetStop),
// in the order the docs name them.
func StopReasons() []StopReason { return slices.Clone(stopReasons) }

// BudgetStop is the stop reason of the budget with the given id.
func BudgetStop(id string) StopReason { return StopReason("budget:" + id) }

// IsBudget reports whether r is a budget stop, and of which budget.
func (r StopReason) IsBudget() (id string, ok bool) {
	return strings.CutPrefix(string(r), "budget:")
}

// Config configures a Kernel. The zero value of every optional field means
// the documented default. A Config must not be modified after New.
type Config struct {
	// Provider reaches the model. Required.
	Provider Provider
	// Store persists sessions. Required (kernel/store/memory for none).
	Store Store
	// Tools are the tools the model may call; nil means none.
	Tools *Registry
	// Policy decides surfaces, calls and budgets; nil allows everything.
	Policy Policy
	// Hooks wrap every tool call, first hook outermost.
	Hooks []Hook
	// Points are the hooks at the run's lifecycle points: run start,
	// before and after each model call, before a compaction, run end.
	// A nil field costs one nil check.
	Points Points
	// MaxContinuations bounds how often run_end hooks may continue one
	// run (default DefaultMaxContinuations).
	MaxContinuations int
	// Model is the model name sent to the provider.
	Model string
	// SystemPrompt, when set, is the first message of every request. It is
	// not stored in the session.
	SystemPrompt string
	// MaxTurns caps the turns (model generations) of one run (default
	// DefaultMaxTurns).
	MaxTurns int
	// ModelTimeout bounds one provider call (default 5 minutes).
	ModelTimeout time.Duration
	// ToolTimeout bounds a tool call whose spec sets no timeout (default 2
	// minutes).
	ToolTimeout time.Duration
	// MaxConcurrentTools caps the tool executions running at once across
	// every source and run of this Kernel; more wait in line. Zero means
	// no cap.
	MaxConcurrentTools int
	// ToolQueueTimeout bounds the time one tool call waits in line, for
	// the MaxConcurrentTools slots and in the tool's own queues (a WASM
	// module's call and run slots, its compilation, its memory budget, a
	// fresh instance; see tool.Queue), all together (default
	// DefaultToolQueueTimeout). The wait is not charged to the tool's
	// timeout, which starts when the tool's own work does.
	ToolQueueTimeout time.Duration
	// Prices price usage per model name; a model without a price costs 0.
	Prices map[string]Price
	// ContextWindow, in tokens, turns on context accounting: thresholds,
	// compaction and the hard limit (see ContextConfig). Zero sends the
	// whole history.
	ContextWindow int
	// Tokenizer counts tokens for the context window; nil estimates 4
	// bytes a token, calibrated per model against the usage the server
	// reports.
	Tokenizer Tokenizer
	// Context sets the warn, compact and hard thresholds and the
	// compaction (see ContextConfig).
	Context ContextConfig
	// Inbox, when set, delivers messages queued for a running session at
	// its step boundaries (see Inbox).
	Inbox Inbox
	// ApprovalTTL is how long a pending approval stays valid (default 24h);
	// an expired approval counts as rejected.
	ApprovalTTL time.Duration
	// OnEvent receives every event. Calls are serialised: OnEvent is never
	// called concurrently, but it may be called from a tool goroutine. It
	// must not block for long.
	OnEvent func(Event)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ScrubInput redacts what a person types before the kernel stores it:
	// the prompt (and the session title taken from it), steered and
	// follow-up messages, an approval's note. The scrubber that redacts
	// tool results is the usual choice, so that a credential pasted into
	// a prompt is stored the way one a tool printed is. nil keeps input as
	// typed.
	ScrubInput func(string) string
	// Retry says how failed model calls are retried (see RetryPolicy).
	Retry RetryPolicy
	// Fallbacks are models tried in order when Model is unavailable (an
	// unknown model) or keeps failing with errors a wait may fix (overload,
	// rate limits, server errors) after its retries. Each assistant message
	// records the model that wrote it (Message.Model).
	Fallbacks []string
	// SessionContext, when set, is recorded in every new session's
	// metadata.
	SessionContext *SessionContext
	// Observe, when set, is told when each run starts and gets its events,
	// store writes and end (see ObserveFunc): telemetry hooks in here.
	// Nil costs nothing.
	Observe ObserveFunc
	// ModelTools says, by model name, how each model is offered tools
	// (see ToolProtocol); a model not in it takes them natively.
	ModelTools map[string]ModelTools
	// MaxCorrections bounds the text-protocol corrections of one run
	// (default DefaultMaxCorrections); the next violation stops the run
	// with StopToolProtocol.
	MaxCorrections int
	// Agent names the agent this Kernel runs (agents: in kernel.yaml): it
	// is recorded in every session the Kernel starts (SessionMeta.Agent)
	// and policy sees it (State.Agent). Empty is the configuration's
	// top-level agent, DefaultAgentName to policy.
	Agent string
	// Budget caps what one run of this Kernel may spend, with what every
	// run it delegates to spends charged to it as it happens; a run it
	// delegates to gets what is left as its own cap. Zero fields set no
	// cap.
	Budget Budget
	// MaxDepth bounds delegation: a child run of this Kernel deeper than
	// it stops with StopMaxDepth (default DefaultMaxDepth).
	MaxDepth int
}

// Kernel runs the agent loop. It is safe for concurrent use by runs of
// different sessions; two concurrent runs of the same session are caught by
// the store's sequence check and the second fails.
type Kernel struct {
	cfg    Config
	chain  Handler
	limit  *toolLimiter // nil: no cap
	emitMu sync.Mutex
	retry  RetryPolicy
	calib  *calibration
	// rooms sizes a new session's history from the runs before it
	// (room.go); shared by the views.
	rooms *roomHint
	// principal, interrupt and lease are the RunOptions of a Kernel made
	// by With.
	principal string
	interrupt <-chan struct{}
	lease     *HeldLease
	// commitStep is RunOptions.CommitStep (nil: Config.Store.Commit).
	commitStep func(ctx context.Context, id string, step Step) error
	// commitEnd is RunOptions.CommitEnd (nil: the last step is committed
	// as the others, its events emitted after it).
	commitEnd func(ctx context.Context, id string, step Step, events []Event) error
	// obs watches the run of a view made by observe (Config.Observe); nil
	// otherwise. Kept here rather than in the run: a run's memory is what
	// every run allocates.
	obs RunObserver
	// realClock: Config.Now is time.Now, so one reading serves both as a
	// timestamp and, with its monotonic part, for durations.
	realClock bool
	// protos are the models that do not take tools natively only.
	protos         map[string]protoSetup
	maxCorrections int
	// scope is what a Kernel running a child session got from its caller
	// (delegate.go); nil for a top-level run.
	scope   *childScope
	maxCont int
}

// New checks cfg and builds a Kernel.
func New(cfg Config) (*Kernel, error) {
	if cfg.Provider == nil {
		return nil, errors.New("kernel: Config.Provider is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("kernel: Config.Store is required")
	}
	if cfg.MaxTurns < 0 {
		return nil, errors.New("kernel: Config.MaxTurns must not be negative")
	}
	if cfg.MaxTurns == 0 {
		cfg.MaxTurns = DefaultMaxTurns
	}
	if cfg.ModelTimeout == 0 {
		cfg.ModelTimeout = 5 * time.Minute
	}
	if cfg.ToolQueueTimeout <= 0 {
		cfg.ToolQueueTimeout = DefaultToolQueueTimeout
	}
	if cfg.ToolTimeout == 0 {
		cfg.ToolTimeout = 2 * time.Minute
	}
	if cfg.ApprovalTTL == 0 {
		cfg.ApprovalTTL = 24 * time.Hour
	}
	if cfg.ScrubInput == nil {
		cfg.ScrubInput = func(s string) string { return s }
	}
	realClock := cfg.Now == nil
	if realClock {
		cfg.Now = time.Now
	}
	if cfg.Tools == nil {
		cfg.Tools = NewRegistry()
	}
	if cfg.MaxConcurrentTools < 0 {
		return nil, errors.New("kernel: Config.MaxConcurrentTools must not be negative")
	}
	protos, err := setupProtocols(cfg.ModelTools)
	if err != nil {
		return nil, err
	}
	if cfg.MaxCorrections < 0 {
		return nil, errors.New("kernel: Config.MaxCorrections must not be negative")
	}
	if cfg.MaxCorrections == 0 {
		cfg.MaxCorrections = DefaultMaxCorrections
	}
	if err := cfg.Budget.check(); err != nil {
		return nil, fmt.Errorf("kernel: Config.Budget: %w", err)
	}
	if cfg.MaxDepth < 0 {
		return nil, errors.New("kernel: Config.MaxDepth must not be negative")
	}
	if cfg.MaxContinuations < 0 {
		return nil, errors.New("kernel: Config.MaxContinuations must not be negative")
	}
	if cfg.MaxContinuations == 0 {
		cfg.MaxContinuations = DefaultMaxContinuations
	}
	k := &Kernel{cfg: cfg, retry: cfg.Retry.withDefaults(), limit: newToolLimiter(cfg.MaxConcurrentTools), calib: new(calibration), rooms: new(roomHint), realClock: realClock,
		protos: protos, maxCorrections: cfg.MaxCorrections, maxCont: cfg.MaxContinuations}
	var h Handler = HandlerFunc(k.core)
	for i := len(cfg.Hooks) - 1; i >= 0; i-- {
		h = cfg.Hooks[i](h)
	}
	k.chain = h
	return k, nil
}

// Tools returns the kernel's registry.
func (k *Kernel) Tools() *Registry { return k.cfg.Tools }

// RunResult is what a run produced.
type RunResult struct {
	SessionID  string
	Output     string
	StopReason StopReason
	// Calls is the audit trail: every tool call of the run, in order.
	Calls    []CallRecord
	Usage    Usage
	CostUSD  float64
	Turns    int
	Duration time.Duration
	// Pending is the approval the run stopped for, if any.
	Pending *Approval
	// Blocked is the block a run stopped by a hook ended with
	// (StopGuardrail).
	Blocked *Block
	// Notes are what run_end hooks said about the run's end.
	Notes []HookText
}

// CallRecord is one tool call in a run's audit trail.
type CallRecord struct {
	ID       string        `json:"id"`
	Tool     string        `json:"tool"`
	Args     string        `json:"args"`
	Outcome  Outcome       `json:"outcome"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration"`
	// Decision is the policy decision, when a policy ruled on the call.
	Decision *Decision `json:"decision,omitempty"`
}

func (k *Kernel) emit(e Event) {
	if k.cfg.OnEvent == nil {
		return
	}
	k.emitMu.Lock()
	defer k.emitMu.Unlock()
	k.cfg.OnEvent(e)
}

// emitAll emits events in order, with no other event between them.
func (k *Kernel) emitAll(events []Event) {
	if k.cfg.OnEvent == nil || len(events) == 0 {
		return
	}
	k.emitMu.Lock()
	defer k.emitMu.Unlock()
	for _, e := range events {
		k.cfg.OnEvent(e)
	}
}
