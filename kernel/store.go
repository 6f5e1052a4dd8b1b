package kernel

import (
	"context"
	"encoding/json"
	"time"
)

// Status is where a session stands.
type Status string

// The session statuses.
const (
	StatusIdle             Status = "idle"
	StatusRunning          Status = "running"
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusFailed           Status = "failed"
)

// SessionMeta is a session's metadata and running totals.
type SessionMeta struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"` // the first prompt, truncated
	Model   string    `json:"model"`
	Status  Status    `json:"status"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// LastSeq is the Seq of the session's last message; Store.Commit keeps it.
	LastSeq uint64 `json:"last_seq"`
	// Runs counts user prompts; Turns counts model generations.
	Runs    int               `json:"runs"`
	Turns   int               `json:"turns"`
	Usage   Usage             `json:"usage"`
	CostUSD float64           `json:"cost_usd"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Delivered are the IDs of the last queued messages delivered into the
	// session (see Inbox), committed with them: a message the inbox offers
	// again after a crash is not delivered twice.
	Delivered []string `json:"delivered,omitempty"`
	// Context is what the session was started with (workspace, config
	// files, policy, model, store), so approvals and later runs resume in
	// the same place. Absent in sessions written before it existed.
	Context *SessionContext `json:"context,omitempty"`
}

// SessionContext records the setting a session runs in. The kernel stores
// Config.Context with a new session; it does not interpret it.
type SessionContext struct {
	Workspace string `json:"workspace,omitempty"`
	// Config are the configuration files laid over the defaults, in order.
	Config []RecordedFile `json:"config,omitempty"`
	// Policy is the policy file and PolicyRevision its revision.
	Policy         *RecordedFile `json:"policy,omitempty"`
	PolicyRevision string        `json:"policy_revision,omitempty"`
	Provider       string        `json:"provider,omitempty"`
	Model          string        `json:"model,omitempty"`
	BaseURL        string        `json:"base_url,omitempty"`
	APIKeyEnv      string        `json:"api_key_env,omitempty"`
	// Script is the scripted provider's script.
	Script *RecordedFile `json:"script,omitempty"`
	Store  string        `json:"store,omitempty"`
}

// RecordedFile is a file and the SHA-256 of its content when recorded.
type RecordedFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
}

// Session is a stored conversation.
type Session struct {
	Meta     SessionMeta
	Messages []Message
	// Pending is the approval the session waits for, or nil.
	Pending *Approval
}

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

// Step is one atomic, durable write: the messages of one loop step (the user
// prompt, an assistant message, or all tool results of one round) together
// with the session's new metadata and approval state.
type Step struct {
	// Messages carry consecutive Seq values continuing the session's LastSeq.
	Messages []Message
	// Meta replaces the stored metadata. Its LastSeq is ignored: the store
	// sets it to the Seq of the last message it holds.
	Meta SessionMeta
	// Pending, when non-nil, becomes the session's pending approval.
	Pending *Approval
	// ClearPending removes the pending approval.
	ClearPending bool
}

// Store persists sessions. The loop commits every step before it moves on,
// so a Store must make a step durable, all or nothing, before Commit returns.
//
// Commit creates the session when it does not exist. It returns an error
// wrapping ErrSeqConflict, and writes nothing, when the first message's Seq
// is not the stored LastSeq+1 or the messages are not consecutive: that is
// how a second writer is caught. Load returns an error wrapping
// ErrSessionNotFound for an unknown id. List returns every session's
// metadata, most recently updated first.
//
// Implementations must be safe for concurrent use; the conformance suite in
// kerneltest checks the contract.
type Store interface {
	Load(ctx context.Context, id string) (*Session, error)
	Commit(ctx context.Context, id string, step Step) error
	List(ctx context.Context) ([]SessionMeta, error)
}

// SessionDeleter is a Store that can delete sessions. Stores without it
// cannot remove sessions; the CLI says so.
type SessionDeleter interface {
	Delete(ctx context.Context, id string) error
}
