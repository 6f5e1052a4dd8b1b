package kernel

import (
	"encoding/json"
	"time"
)

// Approval is a tool call that policy sent to a human. It is persisted with
// the step that stops the run, so it survives a restart.
type Approval struct {
	ID        string   `json:"id"`
	SessionID string   `json:"session_id"`
	Call      ToolCall `json:"call"`
	// Args are the arguments policy decided on (after before hooks).
	Args       json.RawMessage `json:"args"`
	RuleID     string          `json:"rule_id,omitempty"`
	Message    string          `json:"message,omitempty"`
	DecisionID string          `json:"decision_id,omitempty"`
	Created    time.Time       `json:"created"`
	Expires    time.Time       `json:"expires,omitzero"`
	// Agent is the agent whose session asks (SessionMeta.Agent); empty for
	// the top-level agent.
	Agent string `json:"agent,omitempty"`
	// Child, on an approval of an agent call, is the approval the child
	// run waits for: the call a person actually decides (it may in turn
	// have a Child). Approving or rejecting this approval decides it.
	Child *Approval `json:"child,omitempty"`
}

// Asking returns the approval a person decides: a, or the innermost
// Child of an agent call's approval.
func (a *Approval) Asking() *Approval {
	for a != nil && a.Child != nil {
		a = a.Child
	}
	return a
}
