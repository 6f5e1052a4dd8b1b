package kernel

import (
	"context"
	"time"
)

// Policy decides which tools the model sees, what happens to each call, and
// when a run must stop. A nil Policy in Config offers every tool, allows
// every call and sets no budget. Implementations must be safe for concurrent
// use (Decide runs on the goroutines of a concurrent read-only batch) and
// must not retain st.
type Policy interface {
	// Surface returns the tools offered in the next generation, a subset of
	// tools (which it must not modify).
	Surface(ctx context.Context, st *State, tools []ToolSpec) []ToolSpec
	// Decide rules on one validated call after the before hooks.
	Decide(ctx context.Context, st *State, call *Call) Decision
	// Budget is checked before every model call and after every tool round.
	Budget(ctx context.Context, st *State, phase BudgetPhase) BudgetVerdict
}

// State is what policy sees of a run. The loop owns it and updates it
// between steps; it is read-only to everyone else.
type State struct {
	SessionID string
	Model     string
	Labels    map[string]string
	// Prompt is the latest user text.
	Prompt string
	// Run is the number of the current run (user prompt) in the session,
	// from 1.
	Run int
	// Turn is the number of the current turn (model generation) in this
	// run, from 1; it continues across an approval that resumes the run.
	// MaxTurns is the run's hard cap.
	Turn     int
	MaxTurns int
	// SessionTotals are the session's turns (the current one included),
	// tokens and cost; RunTotals this run's (RunTotals.Turns == Turn).
	SessionTotals Totals
	RunTotals     Totals
	// SessionCreated and RunStarted, with Now, give elapsed times.
	SessionCreated time.Time
	RunStarted     time.Time
	Now            time.Time
	// ToolCounts counts the session's tool calls by tool name.
	ToolCounts map[string]int
	// RunCalls lists this run's tool calls with their outcomes, in order.
	RunCalls []CallOutcome
	// Context is the next request's share of the context window (zero
	// without Config.ContextWindow).
	Context ContextUse
}

// CallOutcome is a finished tool call as policy sees it.
type CallOutcome struct {
	Tool    string  `json:"tool" yaml:"tool"`
	Outcome Outcome `json:"outcome" yaml:"outcome"`
}

// Outcome is how a tool call ended.
type Outcome string

// The outcomes of a tool call.
const (
	OutcomeOK          Outcome = "ok"
	OutcomeError       Outcome = "error"   // the tool failed, or its arguments were bad
	OutcomeDenied      Outcome = "denied"  // policy denied it, or it was not offered
	OutcomeBlocked     Outcome = "blocked" // a hook blocked it
	OutcomeCancelled   Outcome = "cancelled"
	OutcomeDeferred    Outcome = "deferred" // not run: another call awaits approval
	OutcomeNeedsReview Outcome = "awaiting_approval"
	OutcomeRejected    Outcome = "rejected"
)

// outcomes lists every Outcome, in the order docs name them.
var outcomes = []Outcome{OutcomeOK, OutcomeError, OutcomeDenied, OutcomeBlocked, OutcomeCancelled, OutcomeDeferred, OutcomeNeedsReview, OutcomeRejected}

// Valid reports whether o is one of the outcomes.
func (o Outcome) Valid() bool {
	for _, x := range outcomes {
		if o == x {
			return true
		}
	}
	return false
}

// OutcomeNames lists the outcomes for messages: "ok, error, ...".
func OutcomeNames() string {
	s := ""
	for i, o := range outcomes {
		if i > 0 {
			s += ", "
		}
		s += string(o)
	}
	return s
}

// Effect is a policy verdict on a tool call.
type Effect string

// The effects, strongest first: deny > ask > allow.
const (
	EffectDeny  Effect = "deny"
	EffectAsk   Effect = "ask"
	EffectAllow Effect = "allow"
)

// Decision is a policy verdict with what it takes to audit it.
type Decision struct {
	ID     string `json:"id"`
	Effect Effect `json:"effect"`
	// Message is what the model (deny) or the approver (ask) is told.
	Message string `json:"message,omitempty"`
	// Rules are the ids of the enforced rules that matched.
	Rules []string `json:"rules,omitempty"`
	// WouldDeny and WouldAsk are dry-run rules that matched and did not act.
	WouldDeny []string `json:"would_deny,omitempty"`
	WouldAsk  []string `json:"would_ask,omitempty"`
	// Default is true when no rule matched and the default applied.
	Default  bool          `json:"default,omitempty"`
	Revision string        `json:"revision,omitempty"`
	SHA256   string        `json:"sha256,omitempty"`
	EvalTime time.Duration `json:"eval_time"`
	// Resolved maps every path argument the kernel resolved to a different
	// real path (a symbolic link, "..") to what the model typed; the rules
	// judged the real path.
	Resolved map[string]string `json:"resolved,omitempty"`
}

// BudgetPhase says when a budget is checked.
type BudgetPhase uint8

// The budget phases.
const (
	BeforeModel BudgetPhase = iota
	AfterTools
)

// BudgetVerdict is the outcome of a budget check.
type BudgetVerdict struct {
	// Warnings are budgets whose warn_when holds. The loop emits each
	// budget's warning once per run.
	Warnings []BudgetNotice
	// Stop, when non-nil, ends the run with stop reason "budget:<ID>".
	Stop *BudgetNotice
}

// BudgetNotice names a budget and what it says.
type BudgetNotice struct {
	ID      string `json:"id"`
	Message string `json:"message,omitempty"`
	// WrapUp asks for one last generation with no tools before stopping.
	WrapUp bool `json:"wrap_up,omitempty"`
}
