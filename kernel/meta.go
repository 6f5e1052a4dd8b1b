package kernel

import "time"

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
	// Agent is the agent the session runs (Config.Agent); empty for the
	// configuration's top-level agent.
	Agent string `json:"agent,omitempty"`
	// Parent links a child session to the call of the session that
	// started it (an agent call); nil for a top-level session.
	Parent *ParentLink `json:"parent,omitempty"`
	// Round is the open round of tool calls with the intents of the calls
	// that were started (intent.go), stored with the assistant message
	// that makes the calls and cleared with their results; nil when no
	// round is open, and in sessions written before intents existed.
	Round *Round `json:"round,omitempty"`
	// Context is what the session was started with (workspace, config
	// files, policy, model, store), so approvals and later runs resume in
	// the same place. Absent in sessions written before it existed.
	Context *SessionContext `json:"context,omitempty"`
}

// SessionContext records the setting a session runs in. The kernel stores
// Config.Context with a new session; it does not interpret it.
type SessionContext struct {
	Workspace string `json:"workspace,omitempty"`
	// WorkspaceID identifies the workspace directory itself: the same path
	// swapped for a symbolic link or another directory has another.
	WorkspaceID *FileID `json:"workspace_id,omitempty"`
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
	// ToolProtocol and ToolFormat are the tool protocol and format the
	// session was started with on the command line, if any.
	ToolProtocol string `json:"tool_protocol,omitempty"`
	ToolFormat   string `json:"tool_format,omitempty"`
}

// FileID identifies a file or directory on its host: its device and inode
// numbers.
type FileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// RecordedFile is a file and the SHA-256 of its content when recorded.
type RecordedFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
}
