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
}
