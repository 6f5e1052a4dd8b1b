package toolproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The formats.
const (
	// Hermes is the format of the Hermes and Qwen chat templates:
	// <tool_call>{"name": ..., "arguments": {...}}</tool_call>, results in
	// <tool_response> blocks.
	Hermes = "hermes"
	// JSON is the format of Llama 3.x's JSON tool calling: one
	// {"name": ..., "parameters": {...}} object per line.
	JSON = "json"
)

// Formats lists the format names, the default first.
func Formats() []string { return []string{Hermes, JSON} }

// Tool is what the instructions say about one offered tool.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments; empty means
	// {"type":"object"}.
	Parameters json.RawMessage
}

// Call is one call found in an answer.
type Call struct {
	Name string
	// Arguments is the argument object's JSON text, as the model wrote it
	// (an object written as a JSON string is unquoted).
	Arguments string
}

// Result is a tool result to write back.
type Result struct {
	// ID is the id of the call it answers; Name its tool.
	ID, Name string
	Content  string
	IsError  bool
}

// Kind names a protocol violation.
type Kind string

// The violations. Each one is answered with a correction.
const (
	// MalformedCall: a call that is not a JSON object with a name and an
	// argument object, a tag never closed, or a call inside a call.
	MalformedCall Kind = "malformed_call"
	// UnknownTool: a call of a tool that is not offered this turn.
	UnknownTool Kind = "unknown_tool"
	// FabricatedResult: the model wrote a result block itself.
	FabricatedResult Kind = "fabricated_result"
	// ProseAfterCall: text after a call, written before its result came
	// back (an answer pretending the call had run).
	ProseAfterCall Kind = "prose_after_call"
	// TooManyCalls: more calls in one answer than MaxCalls.
	TooManyCalls Kind = "too_many_calls"
	// CallTooLarge: a call longer than MaxCallBytes.
	CallTooLarge Kind = "call_too_large"
)

// Kinds lists every Kind.
func Kinds() []Kind {
	return []Kind{MalformedCall, UnknownTool, FabricatedResult, ProseAfterCall, TooManyCalls, CallTooLarge}
}

// Violation is the first way an answer broke the protocol.
type Violation struct {
	Kind Kind
	// Call is the number of the call concerned (from 1), 0 for none.
	Call int
	// Name is the tool named by an unknown call.
	Name string
	// Detail says what was wrong, for the correction and the logs.
	Detail string
}

func (v *Violation) Error() string {
	s := string(v.Kind)
	if v.Call > 0 {
		s += fmt.Sprintf(" (call %d)", v.Call)
	}
	if v.Detail != "" {
		s += ": " + v.Detail
	}
	return s
}

// Answer is a decoded answer.
type Answer struct {
	// Text is the text that was passed on: what the model wrote before its
	// first call (all of it when it made none).
	Text string
	// Calls are the calls, in order; nil when Violation is set.
	Calls []Call
	// Violation is the first violation, nil for none.
	Violation *Violation
	// Attempted reports whether the answer tried to call a tool at all
	// (a call was found, or a call-shaped fragment broke the rules).
	Attempted bool
}

// Codec reads and writes one format. A Codec is immutable and safe for
// concurrent use.
type Codec struct {
	name string
	f    format
}

// format is one syntax.
type format interface {
	instructions(b *strings.Builder, tools []Tool)
	writeCall(b *strings.Builder, c Call)
	writeResult(b *strings.Builder, r Result)
	resultsPrefix() string
	callExample() string
	newScanner() scanner
}

// scanner splits a stream into text and call bodies, reporting to the
// Decoder; it is the format's state machine.
type scanner interface {
	write(d *Decoder, chunk string)
	close(d *Decoder)
}

// Lookup returns the codec of a format name ("" is Hermes).
func Lookup(name string) (*Codec, error) {
	switch name {
	case Hermes, "":
		return &Codec{name: Hermes, f: hermes{}}, nil
	case JSON:
		return &Codec{name: JSON, f: jsonFormat{}}, nil
	}
	return nil, fmt.Errorf("unknown tool format %q (want %s)", name, strings.Join(Formats(), " or "))
}

// Name is the format's name.
func (c *Codec) Name() string { return c.name }

// Instructions is the text for the end of the system prompt: how to call a
// tool and the tools offered, with their schemas. It is empty when no tool
// is offered.
func (c *Codec) Instructions(tools []Tool) string {
	if len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	c.f.instructions(&b, tools)
	return b.String()
}

// FormatCalls writes an assistant message's text and calls the way the
// format writes them (for calls that did not come as text, so that the
// history reads the same to the model).
func (c *Codec) FormatCalls(text string, calls []Call) string {
	var b strings.Builder
	b.WriteString(text)
	for _, call := range calls {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		c.f.writeCall(&b, call)
	}
	return b.String()
}

// FormatResults writes a round of results as the text of one user message,
// in order, each with its call's id and tool name.
func (c *Codec) FormatResults(results []Result) string {
	var b strings.Builder
	for i, r := range results {
		if i > 0 {
			b.WriteByte('\n')
		}
		c.f.writeResult(&b, r)
	}
	return b.String()
}

// IsResults reports whether a user message's text starts with results
// written by FormatResults.
func (c *Codec) IsResults(text string) bool {
	return strings.HasPrefix(text, c.f.resultsPrefix())
}

// Parse decodes a whole answer at once.
func (c *Codec) Parse(text string, cfg DecoderConfig) Answer {
	d := c.NewDecoder(cfg)
	d.Write(text, nil)
	return d.Close(nil)
}

// argsText returns a call's arguments as a JSON object for writing: the
// text itself when it is one, "{}" when empty, else a JSON string quoting
// it (arguments a model once sent malformed stay readable).
func argsText(args string) string {
	t := strings.TrimSpace(args)
	if t == "" {
		return "{}"
	}
	if t[0] == '{' && json.Valid([]byte(t)) {
		return t
	}
	return quote(args)
}

// quote is a JSON string, without HTML escaping.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// marshal is json.Marshal without HTML escaping and without the newline.
func marshal(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// toolLine is one tool as the Qwen and Llama templates list it:
// {"type": "function", "function": {"name", "description", "parameters"}}.
func toolLine(t Tool) string {
	params := json.RawMessage(`{"type":"object"}`)
	if len(bytes.TrimSpace(t.Parameters)) > 0 {
		var c bytes.Buffer
		if err := json.Compact(&c, t.Parameters); err == nil {
			params = c.Bytes()
		}
	}
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	return marshal(struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}{"function", fn{t.Name, t.Description, params}})
}
