package kernel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/agentkernel/agentkernel/kernel/toolproto"
)

// Why a text protocol, and how it is stored: RATIONALE.md, "The text tool
// protocol".

// ToolMode says how a model is offered tools.
type ToolMode string

// The tool modes.
const (
	// ToolsNative offers tools in the request's "tools" field (the default).
	ToolsNative ToolMode = "native"
	// ToolsText offers them in the system prompt, with the text tool
	// protocol (package toolproto), and reads the calls from the answer.
	ToolsText ToolMode = "text"
	// ToolsAuto starts native and switches the model to text for the rest
	// of the session when the server refuses the "tools" field or the
	// model writes its calls as text anyway.
	ToolsAuto ToolMode = "auto"
)

// ToolModes lists the modes, the default first.
func ToolModes() []ToolMode { return []ToolMode{ToolsNative, ToolsText, ToolsAuto} }

// ToolProtocol is how one model is offered tools.
type ToolProtocol struct {
	Mode ToolMode
	// Format is the text protocol's syntax: toolproto.Hermes (the
	// default) or toolproto.JSON. Unused in native mode.
	Format string
}

// LabelTextTools is the session label that lists, comma-separated, the
// models ToolsAuto switched to the text protocol in the session (the
// server refused their tools, or they wrote their calls as text). A
// resumed run or an approval keeps them on text, so it sends the requests
// the run would have sent. Policy sees it as session.labels.text_tools.
const LabelTextTools = "text_tools"

// textTool reports whether the session switched model to text.
func textTool(meta *SessionMeta, model string) bool {
	for m := range strings.SplitSeq(meta.Labels[LabelTextTools], ",") {
		if m == model {
			return true
		}
	}
	return false
}

// CodeToolsUnsupported is the ProviderError code of a server that refuses
// the "tools" field for a model (Ollama's "does not support tools",
// llama.cpp's "tools param requires --jinja flag", ...). It is never
// retried; ToolsAuto switches to the text protocol on it.
const CodeToolsUnsupported = "tools_unsupported"

// DefaultMaxCorrections is the most text-protocol corrections one run
// sends when Config.MaxCorrections is 0.
const DefaultMaxCorrections = 3

// ErrToolProtocol is the error of a run stopped with StopToolProtocol.
var ErrToolProtocol = errors.New("the model kept breaking the text tool protocol")

// ToolProtocolError says how the model broke the protocol the last time.
type ToolProtocolError struct {
	Model       string
	Kind        toolproto.Kind
	Detail      string
	Corrections int // corrections sent in the run before it stopped
}

func (e *ToolProtocolError) Error() string {
	s := "the model"
	if e.Model != "" {
		s = "model " + e.Model
	}
	return fmt.Sprintf("%s broke the text tool protocol again after %d correction(s): %s: %s", s, e.Corrections, e.Kind, e.Detail)
}

func (e *ToolProtocolError) Unwrap() error { return ErrToolProtocol }

// protoSetup is a model's configured protocol, checked by New.
type protoSetup struct {
	mode  ToolMode
	codec *toolproto.Codec
}

// setupProtocols checks Config.ToolProtocols.
func setupProtocols(cfg map[string]ToolProtocol) (map[string]protoSetup, error) {
	if len(cfg) == 0 {
		return nil, nil
	}
	out := make(map[string]protoSetup, len(cfg))
	for model, p := range cfg {
		switch p.Mode {
		case ToolsNative, "":
			continue
		case ToolsText, ToolsAuto:
		default:
			return nil, fmt.Errorf("kernel: Config.ToolProtocols[%q]: mode %q is not native, text or auto", model, p.Mode)
		}
		c, err := toolproto.Lookup(p.Format)
		if err != nil {
			return nil, fmt.Errorf("kernel: Config.ToolProtocols[%q]: %w", model, err)
		}
		out[model] = protoSetup{mode: p.Mode, codec: c}
	}
	return out, nil
}

// proto is how one generation offers tools and reads the answer.
type proto struct {
	// codec reads the answer (nil: a native answer, untouched); with
	// native set it is auto mode's fallback, watching a native answer for
	// calls written as text.
	codec  *toolproto.Codec
	native bool
}

// protoFor is the protocol of model in this session.
func (r *run) protoFor(model string) proto {
	p, ok := r.k.protos[model]
	switch {
	case !ok:
		return proto{native: true}
	case p.mode == ToolsText || textTool(&r.meta, model):
		return proto{codec: p.codec}
	}
	return proto{codec: p.codec, native: true} // auto, not switched
}

// textAnswer is what the text protocol made of a generation.
type textAnswer struct {
	codec     *toolproto.Codec
	violation *toolproto.Violation
}

// textRequest rewrites req for a model that reads tools as text: the
// protocol's instructions and this turn's tools end the system message,
// assistant messages carry their calls as text (as written, when they came
// as text), and each round of tool results becomes one user message. No
// "tools" field is sent. Two user messages in a row are joined, since
// some chat templates refuse them.
func textRequest(req Request, c *toolproto.Codec) Request {
	out := Request{Model: req.Model, Messages: make([]Message, 0, len(req.Messages)+1)}
	in := req.Messages
	instr := c.Instructions(protoTools(req.Tools))
	if len(in) > 0 && in[0].Role == RoleSystem {
		m := in[0]
		if instr != "" {
			m.Content = joinText(m.Content, instr)
		}
		out.Messages = append(out.Messages, m)
		in = in[1:]
	} else if instr != "" {
		out.Messages = append(out.Messages, Message{Role: RoleSystem, Content: instr})
	}
	for i := 0; i < len(in); i++ {
		m := in[i]
		switch m.Role {
		case RoleAssistant:
			switch {
			case m.RawText() != "":
				m.Content = m.RawText()
			case len(m.ToolCalls) > 0:
				m.Content = c.FormatCalls(m.Content, protoCalls(m.ToolCalls))
			}
			m.ToolCalls, m.Protocol, m.Reasoning, m.ReasoningField = nil, nil, "", ""
			out.Messages = append(out.Messages, m)
		case RoleTool:
			j := i
			for j < len(in) && in[j].Role == RoleTool {
				j++
			}
			results := make([]toolproto.Result, 0, j-i)
			for _, t := range in[i:j] {
				results = append(results, toolproto.Result{ID: t.ToolCallID, Name: t.ToolName, Content: t.Content, IsError: t.IsError})
			}
			out.Messages = appendUser(out.Messages, Message{Role: RoleUser, Content: c.FormatResults(results), Time: in[j-1].Time})
			i = j - 1
		case RoleUser:
			out.Messages = appendUser(out.Messages, m)
		default:
			out.Messages = append(out.Messages, m)
		}
	}
	return out
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n\n" + b
}

// appendUser appends a user message, joining it to a user message before it.
func appendUser(msgs []Message, m Message) []Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == RoleUser {
		msgs[n-1].Content = joinText(msgs[n-1].Content, m.Content)
		return msgs
	}
	return append(msgs, m)
}

func protoTools(specs []ToolSpec) []toolproto.Tool {
	if len(specs) == 0 {
		return nil
	}
	out := make([]toolproto.Tool, len(specs))
	for i, s := range specs {
		out[i] = toolproto.Tool{Name: s.Name, Description: s.Description, Parameters: s.Schema}
	}
	return out
}

func protoCalls(calls []ToolCall) []toolproto.Call {
	out := make([]toolproto.Call, len(calls))
	for i, c := range calls {
		out[i] = toolproto.Call{Name: c.Name, Arguments: c.Arguments}
	}
	return out
}

// decoderConfig offers the tools of a request to a decoder.
func decoderConfig(tools []ToolSpec) toolproto.DecoderConfig {
	return toolproto.DecoderConfig{Offered: func(name string) bool {
		for i := range tools {
			if tools[i].Name == name {
				return true
			}
		}
		return false
	}}
}

// streamProto is one provider call under protocol p: with a codec, the
// answer's text streams through a decoder (text before a call passes, a
// tag never does) and the response is rewritten from what it decoded.
// switched reports that auto mode found calls written as text in a native
// answer: the model's tools were ignored, and the answer is read as text.
func (r *run) streamProto(ctx context.Context, req Request, sink func(Delta), p proto, tools []ToolSpec) (resp Response, streamed int, switched bool, err error) {
	if p.codec == nil {
		resp, streamed, err = r.streamOnce(ctx, req, sink)
		return resp, streamed, false, err
	}
	dec := p.codec.NewDecoder(decoderConfig(tools))
	show := func(s string) { sink(Delta{Kind: DeltaText, Text: s}) }
	fed := false
	resp, streamed, err = r.streamOnce(ctx, req, func(d Delta) {
		if d.Kind != DeltaText {
			sink(d)
			return
		}
		fed = true
		dec.Write(d.Text, show)
	})
	if err != nil {
		return resp, streamed, false, err
	}
	if !fed { // a provider that streamed nothing: read the whole answer
		dec.Write(resp.Message.Content, show)
	}
	a := dec.Close(show)
	m := &resp.Message
	if p.native {
		if len(m.ToolCalls) > 0 || !a.Attempted {
			// A native answer: show what the decoder held back.
			if rest, ok := strings.CutPrefix(m.Content, a.Text); ok && rest != "" {
				show(rest)
			}
			return resp, r.streamed, false, nil
		}
		switched = true
	}
	if m.Content != a.Text { // an answer with calls (or that broke the rules)
		m.Protocol = &ProtocolNote{Raw: m.Content}
	}
	m.Content = a.Text
	for _, c := range a.Calls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{Name: c.Name, Arguments: c.Arguments})
	}
	resp.text = &textAnswer{codec: p.codec, violation: a.Violation}
	return resp, r.streamed, switched, nil
}

// switchToText remembers for the session that model takes tools as text,
// and says so once.
func (r *run) switchToText(model string, c *toolproto.Codec, why string) {
	if textTool(&r.meta, model) {
		return
	}
	// A new map: the one in meta may be shared with a stored copy.
	labels := maps.Clone(r.meta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if old := labels[LabelTextTools]; old != "" {
		model = old + "," + model
	}
	labels[LabelTextTools] = model
	r.meta.Labels = labels
	r.k.emitIf(func() Event {
		return Notice{Source: "tool_protocol", Level: "info",
			Text: fmt.Sprintf("%s: %s; using the text tool protocol (%s) for this model in this session", model, why, c.Name())}
	})
}

// refusesTools reports whether err is a server refusing the "tools" field.
func refusesTools(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe) && pe.Code == CodeToolsUnsupported
}

// correct answers a generation that broke the text protocol: the answer
// is stored as written, with a correction after it, and the loop asks the
// model again. A violation right after a correction, or one more than
// Config.MaxCorrections allow, ends the run with StopToolProtocol.
func (r *run) correct(ctx context.Context, resp Response, tools []ToolSpec) (res *RunResult, err error, stop bool) {
	k := r.k
	t := resp.text
	v := t.violation
	msg := resp.Message
	msg.ToolCalls = nil // none of its calls runs
	if r.corrected || r.st.Corrections >= k.maxCorrections {
		if err := r.commitAnswer(ctx, msg); err != nil {
			res, err := r.fail(ctx, err)
			return res, err, true
		}
		r.completed(resp)
		res, err := r.fail(ctx, &ToolProtocolError{Model: msg.Model, Kind: v.Kind, Detail: v.Detail, Corrections: r.st.Corrections})
		return res, err, true
	}
	names := make([]string, len(tools))
	for i := range tools {
		names[i] = tools[i].Name
	}
	fix := Message{Role: RoleUser, Content: t.codec.Correction(v, names, toolproto.DecoderConfig{}), Protocol: &ProtocolNote{Correction: string(v.Kind)}, Time: msg.Time}
	if err := r.commitAnswer(ctx, msg, fix); err != nil {
		res, err := r.fail(ctx, err)
		return res, err, true
	}
	r.st.correct()
	r.corrected = true
	if k.cfg.OnEvent != nil {
		g, n := r.lastGen, r.st.Corrections
		k.emit(MessageCompleted{Turn: r.st.Turn, Message: r.msgs[len(r.msgs)-2], Usage: g.usage, CostUSD: g.cost, Duration: g.dur})
		k.emit(Notice{Source: "tool_protocol", Level: "warn",
			Text: fmt.Sprintf("the model broke the text tool protocol: %s; correction %d of %d sent, asking again", v.Error(), n, k.maxCorrections)})
	}
	return nil, nil, false
}
