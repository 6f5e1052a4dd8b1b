package kernel

import "time"

// Event is one thing that happened during a run. The set of events is
// closed (the interface is sealed): consumers switch on the concrete type.
// MarshalEvent renders any event as JSON with a "type" field; the JSON
// Schema is schemas/events.schema.json.
// Why: RATIONALE.md, "Events are a sealed set of structs, not strings and
// maps".
type Event interface {
	// Type is the event's name, e.g. "tool.completed".
	Type() string
	isEvent()
}

// MarshalEvent renders e as a JSON object whose first field is "type",
// the fields after it as encoding/json renders the struct (per-type
// encoders: event_encode.go).
func MarshalEvent(e Event) ([]byte, error) {
	return AppendEvent(make([]byte, 0, 256), e)
}

// RunStarted opens a run.
type RunStarted struct {
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	Prompt    string `json:"prompt,omitempty"`
	MaxTurns  int    `json:"max_turns"`
	// NewSession is true when the run created the session.
	NewSession bool `json:"new_session,omitempty"`
	// Resumed is true for a run that continues after an approval.
	Resumed bool `json:"resumed,omitempty"`
}

// TurnStarted opens a turn: one generation and its tool round.
type TurnStarted struct {
	Turn     int `json:"turn"`
	MaxTurns int `json:"max_turns"`
}

// ModelRequest is sent just before the provider is called.
type ModelRequest struct {
	Turn     int      `json:"turn"`
	MaxTurns int      `json:"max_turns"`
	Messages int      `json:"messages"`
	Tools    []string `json:"tools"`
	// Progress reads like "[2/8] calling model".
	Progress string `json:"progress"`
}

// MessageDelta is a fragment of the answer text.
type MessageDelta struct {
	Text string `json:"text"`
}

// ReasoningDelta is a fragment of the model's reasoning.
type ReasoningDelta struct {
	Text string `json:"text"`
}

// MessageCompleted is a stored assistant message.
type MessageCompleted struct {
	Turn     int           `json:"turn"`
	Message  Message       `json:"message"`
	Usage    Usage         `json:"usage"`
	CostUSD  float64       `json:"cost_usd"`
	Duration time.Duration `json:"duration"`
}

// ToolStarted is sent when a call enters the pipeline.
type ToolStarted struct {
	Turn   int    `json:"turn"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Args   string `json:"args"`
	// Progress reads like "[2/8] running tools: read_file, search".
	Progress string `json:"progress"`
}

// ToolProgress is a progress report from inside a tool.
type ToolProgress struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Text   string `json:"text"`
}

// ToolCompleted is sent when a call has its result.
type ToolCompleted struct {
	CallID   string        `json:"call_id"`
	Tool     string        `json:"tool"`
	Outcome  Outcome       `json:"outcome"`
	IsError  bool          `json:"is_error,omitempty"`
	Error    string        `json:"error,omitempty"`
	Bytes    int           `json:"bytes"`
	Duration time.Duration `json:"duration"`
}

// PolicyDecided reports a policy decision on a call ("policy.decision").
type PolicyDecided struct {
	CallID   string   `json:"call_id"`
	Tool     string   `json:"tool"`
	Decision Decision `json:"decision"`
}

// ApprovalRequired is sent when a call waits for a human.
type ApprovalRequired struct {
	Approval Approval `json:"approval"`
}

// ApprovalResolved is sent when a pending approval is approved, rejected or
// found expired.
type ApprovalResolved struct {
	ApprovalID string `json:"approval_id"`
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Approved   bool   `json:"approved"`
	Expired    bool   `json:"expired,omitempty"`
	Note       string `json:"note,omitempty"`
	// By names who decided (RunOptions.Principal), when the front end
	// said.
	By string `json:"by,omitempty"`
}

// BudgetWarning is a budget's warn_when holding (once per budget per run).
type BudgetWarning struct {
	BudgetNotice
}

// BudgetExceeded is a budget's stop_when holding.
type BudgetExceeded struct {
	BudgetNotice
}

// ContextCompacted is sent when the context was compacted to fit the
// model's window. Kind is "trimmed" (large tool results cut to head and
// tail), "summarised" (Dropped messages up to Through replaced by a summary
// the compaction Model wrote, at Usage and CostUSD) or "dropped" (old
// exchanges left out of one request, nothing recorded).
type ContextCompacted struct {
	Dropped         int           `json:"dropped"`
	Kept            int           `json:"kept"`
	EstimatedTokens int           `json:"estimated_tokens"`
	Kind            string        `json:"kind,omitempty"`
	Trimmed         int           `json:"trimmed,omitempty"`
	Through         uint64        `json:"through,omitempty"`
	TokensBefore    int           `json:"tokens_before,omitempty"`
	TokensAfter     int           `json:"tokens_after,omitempty"`
	Model           string        `json:"model,omitempty"`
	Usage           Usage         `json:"usage,omitzero"`
	CostUSD         float64       `json:"cost_usd,omitempty"`
	Duration        time.Duration `json:"duration,omitempty"`
}

// ContextWarning is a request reaching the warn threshold of the context
// window (once per run).
type ContextWarning struct {
	Used     int     `json:"used"`
	Window   int     `json:"window"`
	Fraction float64 `json:"fraction"`
}

// SteerDelivered is a queued user message delivered into a running session
// at a step boundary.
type SteerDelivered struct {
	SessionID string `json:"session_id"`
	ID        string `json:"id"`
	Seq       uint64 `json:"seq"`
	Text      string `json:"text"`
}

// ProviderRetry is sent before a failed model call is tried again, or,
// when Fallback is set, before the next model is tried instead.
type ProviderRetry struct {
	// Attempt is the number of the call about to be made (2 for the first
	// retry; 1 for the first call to a fallback).
	Attempt int           `json:"attempt"`
	Delay   time.Duration `json:"delay"`
	Error   string        `json:"error"`
	// Cause names the failure: the HTTP status ("429", "503") or a code
	// ("stream_cut", "stream_idle", "connection", "empty_response",
	// "model_missing").
	Cause      string `json:"cause,omitempty"`
	StatusCode int    `json:"status_code,omitempty"`
	// Model is the model that failed; Fallback, when set, the one tried next.
	Model    string `json:"model,omitempty"`
	Fallback string `json:"fallback,omitempty"`
	// Superseded counts the bytes of text and reasoning the failed attempt
	// had already streamed (message.delta, reasoning.delta): they are void,
	// and the retry streams its answer from the start. Nothing of the
	// failed attempt is stored.
	Superseded int `json:"superseded,omitempty"`
}

// RunCompleted closes a run that stopped for any reason but an error.
type RunCompleted struct {
	SessionID  string        `json:"session_id"`
	StopReason StopReason    `json:"stop_reason"`
	Output     string        `json:"output,omitempty"`
	Usage      Usage         `json:"usage"`
	CostUSD    float64       `json:"cost_usd"`
	Turns      int           `json:"turns"`
	Duration   time.Duration `json:"duration"`
	// Blocked is the block that stopped the run (stop reason guardrail).
	Blocked *Block `json:"blocked,omitempty"`
	// Notes are what run_end hooks said about the run's end.
	Notes []HookText `json:"notes,omitempty"`
}

// RunFailed closes a run that stopped with an error.
type RunFailed struct {
	SessionID  string     `json:"session_id"`
	StopReason StopReason `json:"stop_reason"`
	Error      string     `json:"error"`
}

// HookBlocked is a hook blocking a call or its result, or, at a
// lifecycle point, the run (at run_end: ending it, so that it goes on).
// Phase is the hook point (HookPoints); CallID and Tool are a tool
// call's.
type HookBlocked struct {
	Hook   string `json:"hook"`
	Phase  string `json:"phase"`
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Reason string `json:"reason"`
}

// HookRewrote is a hook changing a call's arguments or result, or at a
// lifecycle point the request, the answer or the prompt.
type HookRewrote struct {
	Hook   string `json:"hook"`
	Phase  string `json:"phase"`
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// What says what changed: "args", "result", "redacted", "truncated",
	// "context", "prompt", "text", "refused", ...
	What string `json:"what"`
}

// HookFailed is a hook that could not do its job. FailOpen says whether the
// call (or the run) went on regardless.
type HookFailed struct {
	Hook     string `json:"hook"`
	Phase    string `json:"phase"`
	CallID   string `json:"call_id,omitempty"`
	Tool     string `json:"tool,omitempty"`
	Error    string `json:"error"`
	FailOpen bool   `json:"fail_open"`
}

// HookCompleted is one hook at a lifecycle point having run: its outcome
// (allowed, blocked, changed or failed) and how long it took. A
// concurrent guardrail's ran beside the model call.
type HookCompleted struct {
	Hook       string        `json:"hook"`
	Phase      string        `json:"phase"`
	Turn       int           `json:"turn"`
	Outcome    string        `json:"outcome"`
	Duration   time.Duration `json:"duration"`
	Concurrent bool          `json:"concurrent,omitempty"`
}

// ConfigReloaded reports a reload of the policy or the hooks; a failed reload
// carries the error and leaves the previous configuration in force.
type ConfigReloaded struct {
	What     string `json:"what"` // "policy", "hooks" or "tools" (the declared tools)
	Source   string `json:"source"`
	Revision string `json:"revision,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Notice is an operational message for the person running the kernel, such
// as a plugin marked unavailable by its circuit breaker.
type Notice struct {
	Source string `json:"source"`
	Level  string `json:"level"` // "info", "warn", "error"
	Text   string `json:"text"`
}

// AgentEvent is an event of a child run (an agent call's), nested under
// the call in the caller's stream: CallID is the caller's call, SessionID
// the child session, Depth the child's depth, and Event the child's event
// (itself an AgentEvent for a grandchild's).
type AgentEvent struct {
	CallID    string `json:"call_id"`
	Agent     string `json:"agent"`
	SessionID string `json:"session_id"`
	Depth     int    `json:"depth"`
	Event     Event  `json:"event"`
}

// Innermost returns the event a chain of AgentEvents carries, and the
// depth it comes from.
func (e AgentEvent) Innermost() (Event, int) {
	var in Event = e
	depth := 0
	for {
		ae, ok := in.(AgentEvent)
		if !ok {
			return in, depth
		}
		in, depth = ae.Event, ae.Depth
	}
}

// eventKinds has one value of every event type, in the order the docs name
// them. It is the one list of event types: schemas/events.schema.json's
// type enum and dispatch are generated from it, and tests hold the Go types
// (every isEvent), the schema's $defs and the docs to it
// (docs/architecture.md, "Closed sets").
var eventKinds = []Event{
	RunStarted{}, TurnStarted{}, ModelRequest{}, MessageDelta{}, ReasoningDelta{}, MessageCompleted{},
	ToolStarted{}, ToolProgress{}, ToolCompleted{}, PolicyDecided{}, ApprovalRequired{}, ApprovalResolved{},
	BudgetWarning{}, BudgetExceeded{}, ContextCompacted{}, ContextWarning{}, SteerDelivered{}, ProviderRetry{},
	RunCompleted{}, RunFailed{}, HookBlocked{}, HookRewrote{}, HookFailed{}, HookCompleted{}, ConfigReloaded{}, Notice{}, AgentEvent{},
}

// EventTypes returns the type of every event (the "type" field of its
// JSON), in the order the docs name them.
func EventTypes() []string {
	types := make([]string, len(eventKinds))
	for i, e := range eventKinds {
		types[i] = e.Type()
	}
	return types
}

func (RunStarted) Type() string       { return "run.started" }
func (TurnStarted) Type() string      { return "turn.started" }
func (ModelRequest) Type() string     { return "model.request" }
func (MessageDelta) Type() string     { return "message.delta" }
func (ReasoningDelta) Type() string   { return "reasoning.delta" }
func (MessageCompleted) Type() string { return "message.completed" }
func (ToolStarted) Type() string      { return "tool.started" }
func (ToolProgress) Type() string     { return "tool.progress" }
func (ToolCompleted) Type() string    { return "tool.completed" }
func (PolicyDecided) Type() string    { return "policy.decision" }
func (ApprovalRequired) Type() string { return "approval.required" }
func (ApprovalResolved) Type() string { return "approval.resolved" }
func (BudgetWarning) Type() string    { return "budget.warning" }
func (BudgetExceeded) Type() string   { return "budget.exceeded" }
func (ContextCompacted) Type() string { return "context.compacted" }
func (ContextWarning) Type() string   { return "context.warning" }
func (SteerDelivered) Type() string   { return "steer.delivered" }
func (ProviderRetry) Type() string    { return "provider.retry" }
func (RunCompleted) Type() string     { return "run.completed" }
func (RunFailed) Type() string        { return "run.failed" }
func (HookBlocked) Type() string      { return "hook.blocked" }
func (HookRewrote) Type() string      { return "hook.rewrote" }
func (HookFailed) Type() string       { return "hook.failed" }
func (HookCompleted) Type() string    { return "hook.completed" }
func (ConfigReloaded) Type() string   { return "config.reloaded" }
func (Notice) Type() string           { return "notice" }
func (AgentEvent) Type() string       { return "agent.event" }

func (RunStarted) isEvent()       {}
func (TurnStarted) isEvent()      {}
func (ModelRequest) isEvent()     {}
func (MessageDelta) isEvent()     {}
func (ReasoningDelta) isEvent()   {}
func (MessageCompleted) isEvent() {}
func (ToolStarted) isEvent()      {}
func (ToolProgress) isEvent()     {}
func (ToolCompleted) isEvent()    {}
func (PolicyDecided) isEvent()    {}
func (ApprovalRequired) isEvent() {}
func (ApprovalResolved) isEvent() {}
func (BudgetWarning) isEvent()    {}
func (BudgetExceeded) isEvent()   {}
func (ContextCompacted) isEvent() {}
func (ContextWarning) isEvent()   {}
func (SteerDelivered) isEvent()   {}
func (ProviderRetry) isEvent()    {}
func (RunCompleted) isEvent()     {}
func (RunFailed) isEvent()        {}
func (HookBlocked) isEvent()      {}
func (HookRewrote) isEvent()      {}
func (HookFailed) isEvent()       {}
func (HookCompleted) isEvent()    {}
func (ConfigReloaded) isEvent()   {}
func (Notice) isEvent()           {}
func (AgentEvent) isEvent()       {}
