package anthropictest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Body is the raw request body, exactly as it arrived.
	Body []byte
	// Fields are the body's top-level members, raw (`_, ok := r.Fields["tools"]`).
	Fields map[string]json.RawMessage
	// Messages is the body decoded.
	Messages MessagesRequest
}

// MessagesRequest is the part of a Messages API request tests look at.
type MessagesRequest struct {
	Model      string          `json:"model"`
	MaxTokens  int64           `json:"max_tokens"`
	Stream     bool            `json:"stream"`
	System     Blocks          `json:"system"`
	Messages   []Message       `json:"messages"`
	Tools      []Tool          `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Thinking   json.RawMessage `json:"thinking"`
}

// Message is one message of the request.
type Message struct {
	Role    string `json:"role"`
	Content Blocks `json:"content"`
}

// Blocks is a content list: an array of blocks, or a string (one text block).
type Blocks []Block

// UnmarshalJSON accepts a string or an array of blocks.
func (b *Blocks) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		raw, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		*b = Blocks{{Type: "text", Text: s, Raw: raw}}
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return err
	}
	out := make(Blocks, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
		out[i].Raw = append(json.RawMessage(nil), r...)
	}
	*b = out
	return nil
}

// Block is one content block, any type.
type Block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Thinking     string          `json:"thinking"`
	Signature    string          `json:"signature"`
	Data         string          `json:"data"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      Blocks          `json:"content"`
	IsError      bool            `json:"is_error"`
	CacheControl *CacheControl   `json:"cache_control"`
	// Raw is the block as sent.
	Raw json.RawMessage `json:"-"`
}

// CacheControl is a cache breakpoint.
type CacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

// Tool is one offered tool, as sent.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *CacheControl   `json:"cache_control"`
	Raw          json.RawMessage `json:"-"`
}

// Breakpoints counts the request's cache_control markers.
func (r *Request) Breakpoints() int {
	n := 0
	for _, t := range r.Messages.Tools {
		if t.CacheControl != nil {
			n++
		}
	}
	for _, b := range r.Messages.System {
		if b.CacheControl != nil {
			n++
		}
	}
	for _, m := range r.Messages.Messages {
		for _, b := range m.Content {
			if b.CacheControl != nil {
				n++
			}
		}
	}
	return n
}

func (r *Request) decode() error {
	if err := json.Unmarshal(r.Body, &r.Fields); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if err := json.Unmarshal(r.Body, &r.Messages); err != nil {
		return err
	}
	var tools struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &tools); err != nil {
		return err
	}
	for i := range r.Messages.Tools {
		r.Messages.Tools[i].Raw = tools.Tools[i]
	}
	return nil
}
