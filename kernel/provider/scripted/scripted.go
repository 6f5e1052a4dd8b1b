// Package scripted is a deterministic kernel.Provider that replays a script
// of model turns from YAML. It powers the offline demo and most tests.
//
// A script is a list of turns (model generations, the kernel's glossary);
// turn N answers the N-th generation of a conversation (the number of
// assistant messages already in the request picks the turn), so a script
// replays the same way in every process and continues across runs of one
// session. A turn may carry a guard (match) on the last user or tool
// message; a guard that does not hold is an error naming the turn, as is a
// conversation that needs more turns than the script has.
//
// The list was called steps before; "steps:" still works for one release
// and Script.Deprecated reports it with its file:line:col.
//
// NewText plays the same script to a kernel that offers tools with the
// text tool protocol: each turn's calls are written as text in the
// protocol's format, as a model without native tool calling writes them,
// and a guard on a tool message matches the user message that carries
// the round's results. A turn's raw text, when set, is sent verbatim
// whatever the mode (to script answers that break the protocol).
//
//	turns:
//	  - text: "Let me look around."
//	    tool_calls:
//	      - name: list_dir
//	        args: {path: "."}
//	  - match: {role: tool, contains: "README.md"}
//	    text: "The project is described in README.md."
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/toolproto"
)

// Script is a parsed script.
type Script struct {
	Name  string
	Turns []Turn

	// unit is what the file calls a turn in messages: "turn", or "step"
	// in a script written with the deprecated "steps:".
	unit       string
	deprecated []string
}

// Turn is one scripted generation.
type Turn struct {
	Text string `yaml:"text"`
	// Raw is the whole answer, sent verbatim: no tool_calls, no text.
	Raw       string     `yaml:"raw"`
	Reasoning string     `yaml:"reasoning"`
	ToolCalls []ToolCall `yaml:"tool_calls"`
	Match     *Match     `yaml:"match"`
	// Usage overrides the token counts, which are otherwise estimated at
	// four bytes a token.
	Usage *kernel.Usage `yaml:"usage"`

	line  int
	args  []string
	regex *regexp.Regexp
}

// ToolCall is a scripted tool call. Args may be any YAML value; RawArgs, when
// set, is sent verbatim (to script malformed JSON).
type ToolCall struct {
	Name    string `yaml:"name"`
	Args    any    `yaml:"args"`
	RawArgs string `yaml:"raw_args"`
}

// Match guards a turn: the last message with Role ("user" or "tool"; any
// role when empty) must contain Contains and match Regex.
type Match struct {
	Role     kernel.Role `yaml:"role"`
	Contains string      `yaml:"contains"`
	Regex    string      `yaml:"regex"`
}

// Load reads and parses a script file.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a script; name is used in error messages.
func Parse(name string, data []byte) (*Script, error) {
	var doc struct {
		Turns []yaml.Node `yaml:"turns"`
		Steps []yaml.Node `yaml:"steps"` // deprecated name of turns
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("script %s: %w", name, err)
	}
	s := &Script{Name: name, unit: "turn"}
	items := doc.Turns
	if steps := topKey(data, "steps"); steps != nil {
		if turns := topKey(data, "turns"); turns != nil {
			return nil, fmt.Errorf("script %s:%d:%d: has both turns and its deprecated name steps: write turns only", name, steps.Line, steps.Column)
		}
		s.unit, items = "step", doc.Steps
		s.deprecated = append(s.deprecated, fmt.Sprintf("%s:%d:%d: steps is deprecated: write turns", name, steps.Line, steps.Column))
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("script %s: no %ss (want a top-level \"turns:\" list)", name, s.unit)
	}
	for i := range items {
		n := &items[i]
		var t Turn
		if err := decodeStrict(n, &t); err != nil {
			return nil, fmt.Errorf("script %s:%d: %s %d: %w", name, n.Line, s.unit, i+1, err)
		}
		t.line = n.Line
		if err := t.compile(s.unit); err != nil {
			return nil, fmt.Errorf("script %s:%d: %s %d: %w", name, n.Line, s.unit, i+1, err)
		}
		s.Turns = append(s.Turns, t)
	}
	return s, nil
}

// Deprecated lists the script's uses of deprecated names, each as
// "file:line:col: old is deprecated: write new". They still work; the CLI
// warns about each when it loads the script, as it does for a policy's
// (policy.Policy.Deprecated).
func (s *Script) Deprecated() []string { return s.deprecated }

// topKey returns the key node of a top-level mapping key of a YAML
// document, or nil.
func topKey(data []byte, key string) *yaml.Node {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return nil
}

// decodeStrict decodes a node rejecting unknown fields (yaml.v3 only checks
// them through a Decoder, so re-encode the node).
func decodeStrict(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

func (st *Turn) compile(unit string) error {
	if st.Raw != "" && (st.Text != "" || len(st.ToolCalls) > 0) {
		return fmt.Errorf("a %s with raw has no text or tool_calls: raw is the whole answer", unit)
	}
	if st.Text == "" && st.Raw == "" && len(st.ToolCalls) == 0 {
		return fmt.Errorf("a %s needs text, tool_calls or raw", unit)
	}
	for i, c := range st.ToolCalls {
		if c.Name == "" {
			return fmt.Errorf("tool call %d: name is required", i+1)
		}
		if c.RawArgs != "" {
			st.args = append(st.args, c.RawArgs)
			continue
		}
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		// As a model writes them: "<", ">" and "&" literal, not \u003c.
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(args); err != nil {
			return fmt.Errorf("tool call %d (%s): args: %w", i+1, c.Name, err)
		}
		st.args = append(st.args, strings.TrimSuffix(b.String(), "\n"))
	}
	if m := st.Match; m != nil {
		if m.Role != "" && m.Role != kernel.RoleUser && m.Role != kernel.RoleTool {
			return fmt.Errorf("match.role must be user or tool, got %q", m.Role)
		}
		if m.Regex != "" {
			re, err := regexp.Compile(m.Regex)
			if err != nil {
				return fmt.Errorf("match.regex: %w", err)
			}
			st.regex = re
		}
	}
	return nil
}

// Provider replays a Script. It keeps no state between requests, so it is
// safe for concurrent use and replays identically after a restart.
type Provider struct {
	script *Script
	// text, when set, writes the calls as text in its format.
	text *toolproto.Codec
}

// New returns a Provider for s.
func New(s *Script) *Provider { return &Provider{script: s} }

// NewText returns a Provider for s that writes each turn's calls as text
// in the tool protocol's format ("hermes" or "json"), for a kernel that
// offers this model its tools as text.
func NewText(s *Script, format string) (*Provider, error) {
	c, err := toolproto.Lookup(format)
	if err != nil {
		return nil, fmt.Errorf("script %s: %w", s.Name, err)
	}
	return &Provider{script: s, text: c}, nil
}

// Stream answers with the turn for this point of the conversation.
func (p *Provider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	if err := ctx.Err(); err != nil {
		return kernel.Response{}, err
	}
	n := 0
	var last *kernel.Message
	for i := range req.Messages {
		switch req.Messages[i].Role {
		case kernel.RoleAssistant:
			n++
		case kernel.RoleUser, kernel.RoleTool:
			last = &req.Messages[i]
		}
	}
	unit := p.script.unit
	if unit == "" {
		unit = "turn" // a Script made in Go, not parsed
	}
	if n >= len(p.script.Turns) {
		return kernel.Response{}, &kernel.ProviderError{Provider: "scripted",
			Message: fmt.Sprintf("script %s has %d %ss and the conversation needs %s %d: the script ran out", p.script.Name, len(p.script.Turns), unit, unit, n+1)}
	}
	st := &p.script.Turns[n]
	if err := st.check(last, p.text); err != nil {
		return kernel.Response{}, &kernel.ProviderError{Provider: "scripted",
			Message: fmt.Sprintf("script %s:%d: %s %d: %v", p.script.Name, st.line, unit, n+1, err)}
	}
	if st.Reasoning != "" {
		emit(kernel.Delta{Kind: kernel.DeltaReasoning, Text: st.Reasoning})
	}
	text := st.Text
	switch {
	case st.Raw != "":
		text = st.Raw
	case p.text != nil && len(st.ToolCalls) > 0:
		calls := make([]toolproto.Call, len(st.ToolCalls))
		for i, c := range st.ToolCalls {
			calls[i] = toolproto.Call{Name: c.Name, Arguments: st.args[i]}
		}
		text = p.text.FormatCalls(st.Text, calls)
	}
	streamWords(text, emit)
	msg := kernel.Message{Role: kernel.RoleAssistant, Content: text, Reasoning: st.Reasoning}
	finish := "stop"
	if len(st.ToolCalls) > 0 && p.text == nil {
		finish = "tool_calls"
		msg.ToolCalls = make([]kernel.ToolCall, len(st.ToolCalls))
		for i, c := range st.ToolCalls {
			msg.ToolCalls[i] = kernel.ToolCall{ID: fmt.Sprintf("call_%d_%d", n+1, i+1), Name: c.Name, Arguments: st.args[i]}
		}
	}
	return kernel.Response{Message: msg, Usage: st.usage(req), FinishReason: finish, Model: req.Model}, nil
}

func (st *Turn) check(last *kernel.Message, text *toolproto.Codec) error {
	m := st.Match
	if m == nil {
		return nil
	}
	if last == nil {
		return fmt.Errorf("match: there is no user or tool message yet")
	}
	role := last.Role
	if text != nil && role == kernel.RoleUser && text.IsResults(last.Content) {
		role = kernel.RoleTool // the round's results, written as text
	}
	if m.Role != "" && role != m.Role {
		return fmt.Errorf("match: the last message is a %s message, want %s", role, m.Role)
	}
	if m.Contains != "" && !strings.Contains(last.Content, m.Contains) {
		return fmt.Errorf("match: the last %s message does not contain %q (it begins %q)", last.Role, m.Contains, head(last.Content, 80))
	}
	if st.regex != nil && !st.regex.MatchString(last.Content) {
		return fmt.Errorf("match: the last %s message does not match /%s/ (it begins %q)", last.Role, m.Regex, head(last.Content, 80))
	}
	return nil
}

func (st *Turn) usage(req kernel.Request) kernel.Usage {
	if st.Usage != nil {
		return *st.Usage
	}
	in := 0
	for i := range req.Messages {
		in += len(req.Messages[i].Content)
		for _, c := range req.Messages[i].ToolCalls {
			in += len(c.Arguments) + len(c.Name)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.Schema)
	}
	out := len(st.Text) + len(st.Raw)
	for _, a := range st.args {
		out += len(a)
	}
	return kernel.Usage{InputTokens: int64(in/4 + 1), OutputTokens: int64(out/4 + 1)}
}

// streamWords emits text a word at a time (each with its trailing space),
// as a model would stream it.
func streamWords(text string, emit func(kernel.Delta)) {
	for len(text) > 0 {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			i = len(text) - 1
		}
		emit(kernel.Delta{Kind: kernel.DeltaText, Text: text[:i+1]})
		text = text[i+1:]
	}
}

func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

var _ kernel.Provider = (*Provider)(nil)
