package kernel

import "strings"

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
