package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
)

// maxBlocks bounds the content blocks of one answer, and so the memory a
// hostile or broken stream can make the accumulator hold.
const maxBlocks = 1024

// block is one content block being assembled.
type block struct {
	typ     string // text, thinking, redacted_thinking, tool_use
	text    strings.Builder
	sig     strings.Builder
	data    string // redacted_thinking
	id      string
	name    string
	input   strings.Builder
	deltas  bool   // input_json_delta seen
	start   string // the tool_use's input at content_block_start
	stopped bool
}

// accumulator assembles the events of one answer, over the requests of a
// pause_turn continuation. It is used by one goroutine.
type accumulator struct {
	names  toolname.Map
	emit   func(kernel.Delta)
	blocks []*block         // every block, in order
	cur    map[int64]*block // this response's blocks by index
	usage  kernel.Usage     // of the earlier responses
	resp   kernel.Usage     // of this response
	stop   string
	detail string // a refusal's explanation
	model  string
	// started: this response sent message_start.
	started bool
	log     hclog.Logger
}

func newAccumulator(names toolname.Map, emit func(kernel.Delta)) *accumulator {
	return &accumulator{names: names, emit: emit, cur: map[int64]*block{}}
}

func (a *accumulator) logger() hclog.Logger {
	if a.log == nil {
		return hclog.NewNullLogger()
	}
	return a.log
}

// next starts the response that continues this one.
func (a *accumulator) next() {
	a.usage = a.usage.Add(a.resp)
	a.resp = kernel.Usage{}
	a.cur = map[int64]*block{}
	a.stop, a.started = "", false
}

// openBlock names the type of a block that started and did not stop.
func (a *accumulator) openBlock() string {
	for _, b := range a.cur {
		if !b.stopped {
			return b.typ
		}
	}
	return ""
}

// eventType reads an event's "type" member.
func eventType(data []byte) (string, bool) {
	var t struct {
		Type *string `json:"type"`
	}
	if json.Unmarshal(data, &t) != nil || t.Type == nil {
		return "", false
	}
	return *t.Type, true
}

// add folds one event in; done is true at message_stop. line is where the
// event starts in the stream, for error messages.
func (a *accumulator) add(name string, data []byte, line int) (done bool, err error) {
	typ, ok := eventType(data)
	if !ok {
		return false, malformed(line, "the event is not a JSON object with a type: "+excerpt(data))
	}
	if name != "" && name != typ {
		return false, malformed(line, fmt.Sprintf("event %q carries data of type %q", name, typ))
	}
	switch typ {
	case "ping":
		return false, nil
	case "error":
		return false, streamError(data, line)
	case "message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta", "content_block_stop":
	default:
		// New event types are announced as harmless to older clients.
		a.logger().Debug("ignored an event of an unknown type", "type", typ, "line", line)
		return false, nil
	}
	var ev sdk.MessageStreamEventUnion
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, malformed(line, fmt.Sprintf("%v: %s", err, excerpt(data)))
	}
	if typ != "message_start" && !a.started {
		return false, malformed(line, typ+" before message_start")
	}
	switch typ {
	case "message_start":
		a.started = true
		if m := ev.Message.Model; m != "" {
			a.model = string(m)
		}
		u := ev.Message.Usage
		a.setUsage(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens, u.OutputTokensDetails.ThinkingTokens)
	case "content_block_start":
		return false, a.start(&ev, line)
	case "content_block_delta":
		return false, a.delta(&ev, line)
	case "content_block_stop":
		b := a.cur[ev.Index]
		if b == nil {
			return false, malformed(line, fmt.Sprintf("content_block_stop for block %d, which never started", ev.Index))
		}
		b.stopped = true
	case "message_delta":
		if s := ev.Delta.StopReason; s != "" {
			a.stop = string(s)
		}
		if d := ev.Delta.StopDetails; d.Explanation != "" || d.Category != "" {
			a.detail = strings.TrimSpace(string(d.Category) + ": " + d.Explanation)
		}
		u := ev.Usage
		// Cumulative counts: a field the event leaves out keeps its value.
		in, write, read, out := a.resp.InputTokens-a.resp.CachedInputTokens-a.resp.CacheWriteTokens, a.resp.CacheWriteTokens, a.resp.CachedInputTokens, a.resp.OutputTokens
		if u.JSON.InputTokens.Valid() {
			in = u.InputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			write = u.CacheCreationInputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			read = u.CacheReadInputTokens
		}
		if u.JSON.OutputTokens.Valid() {
			out = u.OutputTokens
		}
		thinking := a.resp.ReasoningTokens
		if u.OutputTokensDetails.JSON.ThinkingTokens.Valid() {
			thinking = u.OutputTokensDetails.ThinkingTokens
		}
		a.setUsage(in, write, read, out, thinking)
	case "message_stop":
		if a.stop == "" {
			return false, malformed(line, "message_stop without a stop_reason (no message_delta)")
		}
		return true, nil
	}
	return false, nil
}

func (a *accumulator) setUsage(in, write, read, out, thinking int64) {
	for _, n := range []int64{in, write, read, out, thinking} {
		if n < 0 {
			return // nonsense; keep what was read before
		}
	}
	a.resp = kernel.Usage{InputTokens: in + write + read, CachedInputTokens: read, CacheWriteTokens: write,
		OutputTokens: out, ReasoningTokens: thinking}
}

func (a *accumulator) start(ev *sdk.MessageStreamEventUnion, line int) error {
	if _, dup := a.cur[ev.Index]; dup {
		return malformed(line, fmt.Sprintf("block %d started twice", ev.Index))
	}
	if len(a.blocks) >= maxBlocks || ev.Index < 0 {
		return malformed(line, fmt.Sprintf("block index %d is out of range (at most %d blocks)", ev.Index, maxBlocks))
	}
	cb := &ev.ContentBlock
	b := &block{typ: cb.Type}
	switch cb.Type {
	case "text":
		if cb.Text != "" {
			b.text.WriteString(cb.Text)
			a.emit(kernel.Delta{Kind: kernel.DeltaText, Text: cb.Text})
		}
	case "thinking":
		if cb.Thinking != "" {
			b.text.WriteString(cb.Thinking)
			a.emit(kernel.Delta{Kind: kernel.DeltaReasoning, Text: cb.Thinking})
		}
		b.sig.WriteString(cb.Signature)
	case "redacted_thinking":
		b.data = cb.Data
	case "tool_use":
		if cb.ID == "" || cb.Name == "" {
			return malformed(line, fmt.Sprintf("tool_use block %d without an id or a name", ev.Index))
		}
		b.id, b.name, b.start = cb.ID, cb.Name, cb.JSON.Input.Raw()
	default:
		// Server tools and their results: the kernel offers none, so the
		// model cannot have called one.
		return &kernel.ProviderError{Provider: Name, Code: "unsupported_block",
			Message: fmt.Sprintf("line %d: content block type %q is not supported (the kernel offers no server tools)", line, cb.Type)}
	}
	a.cur[ev.Index] = b
	a.blocks = append(a.blocks, b)
	return nil
}

func (a *accumulator) delta(ev *sdk.MessageStreamEventUnion, line int) error {
	b := a.cur[ev.Index]
	if b == nil {
		return malformed(line, fmt.Sprintf("a delta for block %d, which never started", ev.Index))
	}
	if b.stopped {
		return malformed(line, fmt.Sprintf("a delta for block %d after its content_block_stop", ev.Index))
	}
	d := &ev.Delta
	want := map[string]string{"text_delta": "text", "citations_delta": "text", "thinking_delta": "thinking",
		"signature_delta": "thinking", "input_json_delta": "tool_use"}[d.Type]
	if want == "" {
		a.logger().Debug("ignored a delta of an unknown type", "type", d.Type, "line", line)
		return nil
	}
	if want != b.typ {
		return malformed(line, fmt.Sprintf("a %s for block %d, a %s block", d.Type, ev.Index, b.typ))
	}
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			b.text.WriteString(d.Text)
			a.emit(kernel.Delta{Kind: kernel.DeltaText, Text: d.Text})
		}
	case "thinking_delta":
		if d.Thinking != "" {
			b.text.WriteString(d.Thinking)
			a.emit(kernel.Delta{Kind: kernel.DeltaReasoning, Text: d.Thinking})
		}
	case "signature_delta":
		b.sig.WriteString(d.Signature)
	case "input_json_delta":
		b.deltas = true
		b.input.WriteString(d.PartialJSON)
	}
	return nil
}

// thinkingBlock is how a thinking or redacted_thinking block is kept in a
// kernel.ReasoningBlock: the block as the API defines it, so that it goes
// back with exactly the values it came with.
type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// encodeBlock is the stored form of a reasoning block: its JSON, not
// HTML-escaped (the bytes are the provider's; nothing reads them but it).
func encodeBlock(tb thinkingBlock) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(tb) // four strings always encode
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}

// response is the assembled answer.
func (a *accumulator) response() (kernel.Response, error) {
	usage := a.usage.Add(a.resp)
	if a.stop == "refusal" {
		msg := "the model declined to answer (stop_reason refusal)"
		if a.detail != "" {
			msg += ": " + a.detail
		}
		return kernel.Response{}, &kernel.ProviderError{Provider: Name, Code: "refusal", Message: msg, Err: ErrRefusal}
	}
	var msg kernel.Message
	msg.Role = kernel.RoleAssistant
	var text, reasoning strings.Builder
	for i, b := range a.blocks {
		switch b.typ {
		case "text":
			text.WriteString(b.text.String())
		case "thinking":
			reasoning.WriteString(b.text.String())
			msg.ReasoningBlocks = append(msg.ReasoningBlocks, kernel.ReasoningBlock{Provider: Name, Index: i,
				Data: encodeBlock(thinkingBlock{Type: "thinking", Thinking: b.text.String(), Signature: b.sig.String()})})
		case "redacted_thinking":
			msg.ReasoningBlocks = append(msg.ReasoningBlocks, kernel.ReasoningBlock{Provider: Name, Index: i,
				Data: encodeBlock(thinkingBlock{Type: "redacted_thinking", Data: b.data})})
		case "tool_use":
			args := b.start
			if b.deltas || args == "" {
				args = b.input.String()
			}
			if !b.stopped {
				a.logger().Debug("a tool_use block did not finish; its arguments are what arrived",
					"stop_reason", a.stop, "tool", b.name, "bytes", len(args))
			}
			msg.ToolCalls = append(msg.ToolCalls, kernel.ToolCall{ID: b.id, Name: a.names.Decode(b.name), Arguments: args})
		}
	}
	msg.Content, msg.Reasoning = text.String(), reasoning.String()
	return kernel.Response{Message: msg, Usage: usage, FinishReason: a.stop, Model: a.model}, nil
}

// assistantParam is the answer so far as the assistant message a
// pause_turn continuation sends back.
func (a *accumulator) assistantParam() (sdk.MessageParam, error) {
	resp, err := a.response()
	if err != nil {
		return sdk.MessageParam{}, err
	}
	blocks, err := assistantBlocks(resp.Message, func(id string) string { return id })
	if err != nil {
		return sdk.MessageParam{}, err
	}
	return sdk.MessageParam{OfAssistant: &sdk.AssistantMessageParam{Content: blocks}}, nil
}
