package kernel

import "time"

// Role is the author of a Message.
type Role string

// The roles of a conversation, as OpenAI-compatible APIs name them.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation. Messages are values: once the loop
// has appended a Message to a history it never changes it, so stores and
// providers may keep references to its slices.
type Message struct {
	// Seq is the message's position in its session, starting at 1. The loop
	// assigns it; stores persist it and reject gaps (see Store.Commit).
	Seq  uint64 `json:"seq"`
	Role Role   `json:"role"`
	// Content is the text of a system, user or assistant message, or the
	// result a tool message carries back to the model.
	Content string `json:"content,omitempty"`
	// Reasoning is the model's reasoning ("thinking") text when the provider
	// exposes it. It is kept for transcripts; providers send it back only
	// where the server requires it (an assistant message with tool calls,
	// in the current exchange), in the field named by ReasoningField.
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	// IsError marks a tool message that reports a failure (unknown tool,
	// invalid arguments, denial, tool error, cancellation).
	IsError bool      `json:"is_error,omitempty"`
	Time    time.Time `json:"time,omitzero"`
	// Model is the model that wrote an assistant message: the configured
	// model, or the fallback that answered instead.
	Model string `json:"model,omitempty"`
	// ReasoningField is the wire field the reasoning arrived in
	// ("reasoning_content" or "reasoning"), for providers that echo it.
	ReasoningField string `json:"reasoning_field,omitempty"`
	// Failed marks an assistant message the kernel wrote for a turn that
	// got no answer (the model call failed, or the run was cancelled before
	// it answered); it holds the reason. Failed messages, and the prompt
	// they answer, are kept in the session but left out of requests, so
	// the next prompt never follows another user message.
	Failed string `json:"failed,omitempty"`
	// Protocol is set on the messages of the text tool protocol (see
	// ToolProtocol) and nil on every other message (a pointer, so that
	// messages without it stay as small as they were).
	Protocol *ProtocolNote `json:"protocol,omitempty"`
	// Approval is set on the tool message that answers a call a human
	// decided: the decision and who made it.
	Approval *ApprovalRecord `json:"approval,omitempty"`
	// Child is set on the tool message that answers an agent call: the
	// child session that ran it and how it ended.
	Child *ChildRun `json:"child,omitempty"`
}

// ProtocolNote is what a message of the text tool protocol carries beside
// its content. Like its message, it never changes once in a history.
type ProtocolNote struct {
	// Raw is an assistant message exactly as the model wrote it: Content
	// is then the text before its first call, and ToolCalls the calls read
	// from it. Requests in text mode send Raw back verbatim.
	Raw string `json:"raw,omitempty"`
	// Correction marks a user message the kernel wrote to correct a
	// violation of the protocol; it holds the violation's kind
	// (toolproto.Kind). Such a message does not start a run.
	Correction string `json:"correction,omitempty"`
}

// RawText is the answer as the model wrote it (Protocol.Raw), or "".
func (m *Message) RawText() string {
	if m.Protocol == nil {
		return ""
	}
	return m.Protocol.Raw
}

// CorrectionKind is the violation a kernel-written correction answers
// (Protocol.Correction), or "".
func (m *Message) CorrectionKind() string {
	if m.Protocol == nil {
		return ""
	}
	return m.Protocol.Correction
}

// ApprovalRecord is how a pending approval was decided, recorded with the
// call's result (Message.Approval) and in the decision log.
type ApprovalRecord struct {
	// ID is the approval's.
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
	// Expired: nobody decided in time (Config.ApprovalTTL).
	Expired bool `json:"expired,omitempty"`
	// By names who decided (RunOptions.Principal), when the front end said.
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the argument text exactly as the model produced it. It is
	// a string, not json.RawMessage, because models do produce malformed JSON
	// and the history must keep what they said.
	Arguments string `json:"arguments"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	ReasoningTokens   int64 `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens + o.InputTokens,
		OutputTokens:      u.OutputTokens + o.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + o.CachedInputTokens,
		ReasoningTokens:   u.ReasoningTokens + o.ReasoningTokens,
	}
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputPerMTok float64 `json:"input_per_mtok" yaml:"input_per_mtok"`
	// CachedInputPerMTok prices the cached part of the input; zero means the
	// cached part is billed at InputPerMTok.
	CachedInputPerMTok float64 `json:"cached_input_per_mtok,omitempty" yaml:"cached_input_per_mtok"`
	OutputPerMTok      float64 `json:"output_per_mtok" yaml:"output_per_mtok"`
}

// cost is the price of u in US dollars.
func (p Price) cost(u Usage) float64 {
	cached := p.CachedInputPerMTok
	if cached == 0 {
		cached = p.InputPerMTok
	}
	in := float64(u.InputTokens-u.CachedInputTokens)*p.InputPerMTok + float64(u.CachedInputTokens)*cached
	return (in + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}
