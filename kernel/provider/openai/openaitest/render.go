package openaitest

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Fragment sizes of the rendered stream: small enough that every reply and
// every argument string arrives in several pieces, as real servers send them.
const (
	textPiece = 16
	argPiece  = 12
)

// chunk is a chat.completion.chunk as OpenAI sends it.
type chunk struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	SystemFingerprint string         `json:"system_fingerprint"`
	Choices           []choice       `json:"choices"`
	Usage             map[string]any `json:"usage"`
}

type choice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []deltaToolCall `json:"tool_calls,omitempty"`
}

type deltaToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// render builds the event stream of a reply step for request number n.
func render(step Step, req *Request, n int) []string {
	model := req.Chat.Model
	base := chunk{
		ID:                fmt.Sprintf("chatcmpl-openaitest-%d", n),
		Object:            "chat.completion.chunk",
		Created:           1700000000 + int64(n),
		Model:             model,
		SystemFingerprint: "fp_openaitest",
	}
	var events []string
	add := func(d delta, finish string) {
		c := base
		ch := choice{Delta: d}
		if finish != "" {
			ch.FinishReason = &finish
		}
		c.Choices = []choice{ch}
		events = append(events, event(c))
	}
	str := func(s string) *string { return &s }

	add(delta{Role: "assistant", Content: str("")}, "")
	for _, p := range pieces(step.Reasoning, textPiece) {
		add(delta{ReasoningContent: str(p)}, "")
	}
	for _, p := range pieces(step.Text, textPiece) {
		add(delta{Content: str(p)}, "")
	}
	out := len(step.Text) + len(step.Reasoning)
	for i, call := range step.Calls {
		id := call.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", n, i)
		}
		first := deltaToolCall{Index: i, ID: id, Type: "function"}
		first.Function.Name = WireName(call.Name)
		add(delta{ToolCalls: []deltaToolCall{first}}, "")
		for _, p := range pieces(call.Arguments, argPiece) {
			frag := deltaToolCall{Index: i}
			frag.Function.Arguments = p
			add(delta{ToolCalls: []deltaToolCall{frag}}, "")
		}
		out += len(call.Name) + len(call.Arguments)
	}
	if step.Cut {
		return events
	}
	finish := step.FinishReason
	if finish == "" {
		finish = "stop"
		if len(step.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	add(delta{}, finish)
	if o := req.Chat.StreamOptions; o != nil && o.IncludeUsage {
		in, outTok, cached, reasoning := tokens(len(req.Body)), tokens(out), int64(0), tokens(len(step.Reasoning))
		if u := step.Usage; u != nil {
			in, outTok, cached, reasoning = u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.ReasoningTokens
		}
		c := base
		c.Choices = []choice{}
		c.Usage = map[string]any{
			"prompt_tokens":             in,
			"completion_tokens":         outTok,
			"total_tokens":              in + outTok,
			"prompt_tokens_details":     map[string]int64{"cached_tokens": cached},
			"completion_tokens_details": map[string]int64{"reasoning_tokens": reasoning},
		}
		events = append(events, event(c))
	}
	return append(events, "data: [DONE]\n\n")
}

func event(c chunk) string {
	b, err := json.Marshal(c)
	if err != nil {
		return "" // unreachable: a chunk holds only strings, numbers and maps of them
	}
	return "data: " + string(b) + "\n\n"
}

// tokens estimates a token count: one per 4 bytes, at least 1 for any text.
func tokens(n int) int64 { return int64((n + 3) / 4) }

// pieces splits s into pieces of about size bytes, never inside a rune.
func pieces(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// splitEvents cuts a recorded stream into its events (each with its blank
// line), so that replay flushes them one at a time.
func splitEvents(sse string) []string {
	var out []string
	for len(sse) > 0 {
		i := strings.Index(sse, "\n\n")
		if i < 0 {
			out = append(out, sse)
			break
		}
		out = append(out, sse[:i+2])
		sse = sse[i+2:]
	}
	return out
}
