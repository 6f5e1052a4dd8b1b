package anthropictest

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Fragment sizes of the rendered stream: every text, thinking and input
// arrives in several pieces, as the API sends them.
const (
	textPiece = 24
	argPiece  = 16
)

// render builds the event stream of a reply step for request number n.
func render(step Step, model string, usage Usage, n int) []string {
	var events []string
	add := func(typ string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // unreachable: maps of strings and numbers
		}
		events = append(events, "event: "+typ+"\ndata: "+string(b)+"\n\n")
	}
	type obj = map[string]any
	add("message_start", obj{"type": "message_start", "message": obj{
		"model": model, "id": fmt.Sprintf("msg_anthropictest_%d", n), "type": "message", "role": "assistant",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "stop_details": nil,
		"usage": obj{"input_tokens": usage.Input, "cache_creation_input_tokens": usage.CacheWrite,
			"cache_read_input_tokens": usage.CacheRead, "output_tokens": 1, "service_tier": "standard"},
	}})
	index := 0
	out := 0
	cutAt := step.CutInBlock - 1 // -1: no cut inside a block
	block := func(start obj, deltas []obj) {
		add("content_block_start", obj{"type": "content_block_start", "index": index, "content_block": start})
		if index == 0 {
			events = append(events, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
		for _, d := range deltas {
			add("content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": d})
		}
		if index == cutAt {
			return
		}
		add("content_block_stop", obj{"type": "content_block_stop", "index": index})
		index++
	}
	cut := func() bool { return cutAt >= 0 && index == cutAt }
	if step.Thinking != "" || step.Signature != "" {
		var ds []obj
		for _, p := range pieces(step.Thinking, textPiece) {
			ds = append(ds, obj{"type": "thinking_delta", "thinking": p})
		}
		sig := step.Signature
		if sig == "" {
			sig = fmt.Sprintf("anthropictest-signature-%d", n)
		}
		ds = append(ds, obj{"type": "signature_delta", "signature": sig})
		block(obj{"type": "thinking", "thinking": "", "signature": ""}, ds)
		out += len(step.Thinking)
		if cut() {
			return events
		}
	}
	if step.Redacted != "" {
		block(obj{"type": "redacted_thinking", "data": step.Redacted}, nil)
		if cut() {
			return events
		}
	}
	if step.Text != "" {
		var ds []obj
		for _, p := range pieces(step.Text, textPiece) {
			ds = append(ds, obj{"type": "text_delta", "text": p})
		}
		block(obj{"type": "text", "text": ""}, ds)
		out += len(step.Text)
		if cut() {
			return events
		}
	}
	for i, call := range step.Calls {
		id := call.ID
		if id == "" {
			id = fmt.Sprintf("toolu_%02d_%02d", n, i)
		}
		var ds []obj
		for _, p := range pieces(call.Arguments, argPiece) {
			ds = append(ds, obj{"type": "input_json_delta", "partial_json": p})
		}
		block(obj{"type": "tool_use", "id": id, "name": WireName(call.Name), "input": obj{}}, ds)
		out += len(call.Name) + len(call.Arguments)
		if cut() {
			return events
		}
	}
	if step.Cut || cutAt >= 0 {
		return events // cut after the last block, before message_delta
	}
	stop := step.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(step.Calls) > 0 {
			stop = "tool_use"
		}
	}
	outTok := int64((out + 3) / 4)
	if step.OutputTokens > 0 {
		outTok = step.OutputTokens
	}
	delta := obj{"stop_reason": stop, "stop_sequence": nil}
	if stop == "refusal" {
		delta["stop_details"] = obj{"type": "refusal", "category": nil, "explanation": nil}
	}
	add("message_delta", obj{"type": "message_delta", "delta": delta,
		"usage": obj{"input_tokens": usage.Input, "cache_creation_input_tokens": usage.CacheWrite,
			"cache_read_input_tokens": usage.CacheRead, "output_tokens": outTok}})
	add("message_stop", obj{"type": "message_stop"})
	return events
}

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
