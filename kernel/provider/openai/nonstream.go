package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	oa "github.com/openai/openai-go/v3"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/wire"
)

// completion reads a JSON answer to a streaming request: a whole
// chat.completion (a server or proxy that ignored "stream": true), or an
// error object sent with a 2xx status. The completion's reasoning and text
// are passed to emit in one delta each, so the caller sees what it would
// have seen streamed.
func (p *Provider) completion(parent, ctx context.Context, res *http.Response, names toolname.Map, emit func(kernel.Delta)) (kernel.Response, error) {
	body, err := io.ReadAll(io.LimitReader(res.Body, wire.MaxLine))
	if err != nil {
		return kernel.Response{}, p.failure(parent, ctx, err, "read response")
	}
	if code, msg, ok := parseErrorBody(body); ok {
		return kernel.Response{}, refusedTools(&kernel.ProviderError{Provider: Name, StatusCode: res.StatusCode, Code: code, Message: msg, Retryable: retryableCode(code)})
	}
	notStream := &kernel.ProviderError{Provider: Name, StatusCode: res.StatusCode, Code: "not_a_stream",
		Message: "the server answered with application/json that is neither an event stream nor a chat completion: " + excerpt(body)}
	var cc oa.ChatCompletion
	if !isObject(body) || json.Unmarshal(body, &cc) != nil || len(cc.Choices) == 0 {
		return kernel.Response{}, notStream
	}
	ch := cc.Choices[0]
	m := ch.Message
	reasoning, field, err := reasoningFields(m.JSON.ExtraFields, "choices[0].message", 0)
	if err != nil {
		return kernel.Response{}, err
	}
	text := m.Content
	if text == "" {
		text = m.Refusal
	}
	msg := kernel.Message{Role: kernel.RoleAssistant, Content: text, Reasoning: reasoning, ReasoningField: field}
	if reasoning != "" {
		emit(kernel.Delta{Kind: kernel.DeltaReasoning, Text: reasoning})
	}
	if text != "" {
		emit(kernel.Delta{Kind: kernel.DeltaText, Text: text})
	}
	for i, tc := range m.ToolCalls {
		if tc.Function.Name == "" {
			return kernel.Response{}, malformed(0, fmt.Sprintf("choices[0].message.tool_calls[%d] has no function name", i))
		}
		id := tc.ID
		if raw := tc.JSON.ID.Raw(); id == "" && isNumber(raw) {
			id = raw
		}
		msg.ToolCalls = append(msg.ToolCalls, kernel.ToolCall{ID: id, Name: names.Decode(tc.Function.Name), Arguments: tc.Function.Arguments})
	}
	u := cc.Usage
	usage := kernel.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}
	return kernel.Response{Message: msg, Usage: usage, FinishReason: ch.FinishReason, Model: cc.Model}, nil
}
