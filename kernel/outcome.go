package kernel

import (
	"slices"
	"strings"
)

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

// outcomes is every Outcome, in the order the docs name them. It is the
// one list: the schemas and the docs tables that name the outcomes are held
// to it by tests (docs/architecture.md, "Closed sets").
var outcomes = []Outcome{OutcomeOK, OutcomeError, OutcomeDenied, OutcomeBlocked, OutcomeCancelled, OutcomeDeferred, OutcomeNeedsReview, OutcomeRejected}

// Outcomes returns every Outcome, in the order the docs name them.
func Outcomes() []Outcome { return slices.Clone(outcomes) }

// Valid reports whether o is one of the outcomes.
func (o Outcome) Valid() bool { return slices.Contains(outcomes, o) }

// OutcomeNames lists the outcomes for messages: "ok, error, ...".
func OutcomeNames() string {
	names := make([]string, len(outcomes))
	for i, o := range outcomes {
		names[i] = string(o)
	}
	return strings.Join(names, ", ")
}

// StoredOutcome classifies a stored tool result: the outcome the loop
// recorded for it and a short description (ran, denied, not offered,
// rejected, interrupted, ...). The store keeps the result text, not the
// outcome, so the texts the loop writes are what tells them apart.
func StoredOutcome(m *Message) (Outcome, string) {
	c := m.Content
	switch {
	case !m.IsError:
		return OutcomeOK, "ran"
	case strings.HasPrefix(c, "denied by policy"):
		return OutcomeDenied, "denied"
	case strings.Contains(c, ErrNotOffered.Error()):
		return OutcomeDenied, "not offered"
	case strings.HasPrefix(c, "not run: rejected"):
		return OutcomeRejected, "rejected"
	case strings.HasPrefix(c, "not run: approval expired"):
		return OutcomeRejected, "approval expired"
	case strings.HasPrefix(c, "not run: "):
		return OutcomeDeferred, "deferred"
	case c == Interrupted:
		return OutcomeCancelled, "interrupted"
	case c == Cancelled:
		return OutcomeCancelled, "cancelled"
	case strings.Contains(c, ErrInvalidArgs.Error()):
		return OutcomeError, "invalid arguments"
	case strings.Contains(c, ErrUnknownTool.Error()):
		return OutcomeError, "unknown tool"
	case strings.Contains(c, ErrBlocked.Error()):
		return OutcomeBlocked, "blocked by a hook"
	}
	return OutcomeError, "ran (tool error)"
}
