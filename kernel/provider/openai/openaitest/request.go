package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Fields are the body's top-level members, raw, to check what was sent
	// and what was left out (`_, ok := r.Fields["tools"]`).
	Fields map[string]json.RawMessage
	// Chat is the body decoded.
	Chat ChatRequest
}

// ChatRequest is the part of a chat completion request tests look at.
type ChatRequest struct {
	Model             string          `json:"model"`
	Stream            bool            `json:"stream"`
	StreamOptions     *StreamOptions  `json:"stream_options"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ReasoningEffort   string          `json:"reasoning_effort"`
	Messages          []Message       `json:"messages"`
	Tools             []Tool          `json:"tools"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of the request.
type Message struct {
	Role string `json:"role"`
	// Content is the message's text; content parts are joined.
	Content    Content        `json:"content"`
	ToolCalls  []WireToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
	// ReasoningContent and Reasoning are an assistant message's reasoning
	// echoed back (DeepSeek, vLLM and llama.cpp name it reasoning_content;
	// Ollama and OpenRouter reasoning).
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
}

// WireToolCall is a tool call of an assistant message, as sent.
type WireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is one offered tool, as sent.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Content is a message's content: a string, or an array of text parts whose
// texts are joined.
type Content string

// UnmarshalJSON accepts a string, null, or an array of {"type","text"} parts.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = ""
		return nil
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			sb.WriteString(p.Text)
		}
		*c = Content(sb.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*c = Content(s)
	return nil
}

// ToolNames are the function names of the offered tools, as sent (see
// WireName).
func (r Request) ToolNames() []string {
	names := make([]string, len(r.Chat.Tools))
	for i, t := range r.Chat.Tools {
		names[i] = t.Function.Name
	}
	return names
}

func (r *Request) decode() error {
	if err := json.Unmarshal(r.Body, &r.Fields); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if err := json.Unmarshal(r.Body, &r.Chat); err != nil {
		return err
	}
	return nil
}
