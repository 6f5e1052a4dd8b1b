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
	// ReasoningBlocks are the content blocks of an assistant message that
	// its provider needs back exactly as it sent them (Anthropic's signed
	// thinking and redacted_thinking blocks), in the order they came. The
	// kernel stores and returns them byte for byte and never reads them;
	// Reasoning holds their text for people.
	ReasoningBlocks []ReasoningBlock `json:"reasoning_blocks,omitempty"`
	// Hooks records what lifecycle hooks did here (see HookRecord); nil
	// on every other message.
	Hooks *HookRecord `json:"hooks,omitempty"`
}

// ReasoningBlock is one provider-specific block of an assistant message,
// opaque to the kernel (Message.ReasoningBlocks). Like its message, it
// never changes once in a history.
type ReasoningBlock struct {
	// Provider is the provider that wrote the block ("anthropic"); other
	// providers leave it out of their requests.
	Provider string `json:"provider"`
	// Index is the block's position among the content blocks of the answer
	// the provider received, so that it can put it back where it was.
	Index int `json:"index"`
	// Data is the block in the provider's own wire format, exactly as the
	// provider assembled it (base64 in JSON, so that no encoder can change
	// a byte of it).
	Data []byte `json:"data"`
}

// ProtocolNote is what a message of the text tool protocol carries beside
// its content. Like its message, it never changes once in a history.
type ProtocolNote struct {
	// Raw is an assistant message exactly as the model wrote it: Content
	// is then the text before its first call, and ToolCalls the calls read
	// from it. Requests on the text tool protocol send Raw back verbatim.
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

// Usage counts tokens. InputTokens counts every token of the prompt,
// cached or not: CachedInputTokens of them were read from the server's
// prompt cache, and CacheWriteTokens were written to it (both are part of
// InputTokens, and priced at their own rates).
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64 `json:"cache_write_input_tokens,omitempty"`
	ReasoningTokens   int64 `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens + o.InputTokens,
		OutputTokens:      u.OutputTokens + o.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + o.CachedInputTokens,
		CacheWriteTokens:  u.CacheWriteTokens + o.CacheWriteTokens,
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
	// CacheWriteInputPerMTok prices the input written to the prompt cache
	// (Anthropic bills it above the input rate); zero means InputPerMTok.
	CacheWriteInputPerMTok float64 `json:"cache_write_input_per_mtok,omitempty" yaml:"cache_write_input_per_mtok"`
	OutputPerMTok          float64 `json:"output_per_mtok" yaml:"output_per_mtok"`
}

// Cost is the price of u in US dollars: the plain input, the cached input,
// the cache writes and the output, each at its rate.
func (p Price) Cost(u Usage) float64 {
	cached := p.CachedInputPerMTok
	if cached == 0 {
		cached = p.InputPerMTok
	}
	write := p.CacheWriteInputPerMTok
	if write == 0 {
		write = p.InputPerMTok
	}
	plain := u.InputTokens - u.CachedInputTokens - u.CacheWriteTokens
	in := float64(plain)*p.InputPerMTok + float64(u.CachedInputTokens)*cached + float64(u.CacheWriteTokens)*write
	return (in + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}
