package kernel

import (
	"context"
	"slices"
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

// Effect is a policy verdict on a tool call.
type Effect string

// The effects, strongest first: deny > ask > allow.
const (
	EffectDeny  Effect = "deny"
	EffectAsk   Effect = "ask"
	EffectAllow Effect = "allow"
)

// effects is every Effect, strongest first. It is the one list: the
// schemas and the docs that name the effects are held to it by tests
// (docs/architecture.md, "Closed sets").
var effects = []Effect{EffectDeny, EffectAsk, EffectAllow}

// Effects returns every Effect, strongest first.
func Effects() []Effect { return slices.Clone(effects) }

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
