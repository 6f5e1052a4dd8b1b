package openai

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
)

// maxToolCalls bounds the tool calls of one response, and so the memory a
// hostile or broken stream can make the accumulator hold per call.
const maxToolCalls = 1024

// accumulator assembles the chunks of one streamed response. It is used by
// one goroutine.
type accumulator struct {
	names     toolname.Map
	emit      func(kernel.Delta)
	text      strings.Builder
	reasoning strings.Builder
	// reasoningField is the delta field the reasoning came in.
	reasoningField string
	calls          []*callAcc // in order of first appearance
	usage          kernel.Usage
	finish         string
	model          string
	chunks         int
	log            hclog.Logger // nil logs nothing
}

func (a *accumulator) logger() hclog.Logger {
	if a.log == nil {
		return hclog.NewNullLogger()
	}
	return a.log
}

// callAcc is one tool call being assembled.
type callAcc struct {
	index int64
	id    string
	name  string
	args  strings.Builder
}

func newAccumulator(names toolname.Map, emit func(kernel.Delta)) *accumulator {
	return &accumulator{names: names, emit: emit}
}

// add folds one chunk (the data of one event) into the response. line is
// where the chunk starts in the stream, for error messages.
func (a *accumulator) add(data []byte, line int) error {
	if !isObject(data) {
		return malformed(line, "the chunk is not a JSON object: "+excerpt(data))
	}
	var c oa.ChatCompletionChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return malformed(line, fmt.Sprintf("%v: %s", err, excerpt(data)))
	}
	a.chunks++
	if f, ok := c.JSON.ExtraFields["error"]; ok && f.Raw() != "null" {
		return streamError(data, line)
	}
	if c.JSON.Object.Raw() == `"error"` { // vLLM before 0.10: the error object itself, as a chunk
		return streamError(data, line)
	}
	if err := check(line, "model", c.JSON.Model, "a string"); err != nil {
		return err
	}
	if c.Model != "" {
		a.model = c.Model
	}
	if err := a.addUsage(&c, line); err != nil {
		return err
	}
	if err := check(line, "choices", c.JSON.Choices, "an array"); err != nil {
		return err
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		path := fmt.Sprintf("choices[%d]", i)
		if !isObjectString(ch.RawJSON()) {
			return malformed(line, path+" is not an object")
		}
		if err := check(line, path+".index", ch.JSON.Index, "an integer"); err != nil {
			return err
		}
		if ch.Index != 0 {
			continue // only one choice is asked for (n=1)
		}
		if err := a.addChoice(ch, path, line); err != nil {
			return err
		}
	}
	return nil
}

func (a *accumulator) addChoice(ch *oa.ChatCompletionChunkChoice, path string, line int) error {
	if err := check(line, path+".finish_reason", ch.JSON.FinishReason, "a string"); err != nil {
		return err
	}
	if err := check(line, path+".delta", ch.JSON.Delta, "an object"); err != nil {
		return err
	}
	d := &ch.Delta
	path += ".delta"
	for _, f := range []struct {
		name string
		fld  respjson.Field
	}{{"content", d.JSON.Content}, {"refusal", d.JSON.Refusal}} {
		if err := check(line, path+"."+f.name, f.fld, "a string"); err != nil {
			return err
		}
	}
	if err := check(line, path+".tool_calls", d.JSON.ToolCalls, "an array"); err != nil {
		return err
	}

	r, field, err := reasoningText(d, path, line)
	if err != nil {
		return err
	}
	if r != "" {
		if a.reasoningField == "" {
			a.reasoningField = field
		}
		a.reasoning.WriteString(r)
		a.emit(kernel.Delta{Kind: kernel.DeltaReasoning, Text: r})
	}
	// A refusal is the model's answer to the user, so it is text too.
	for _, t := range [2]string{d.Content, d.Refusal} {
		if t != "" {
			a.text.WriteString(t)
			a.emit(kernel.Delta{Kind: kernel.DeltaText, Text: t})
		}
	}
	for j := range d.ToolCalls {
		if err := a.addCall(&d.ToolCalls[j], fmt.Sprintf("%s.tool_calls[%d]", path, j), line); err != nil {
			return err
		}
	}
	if ch.FinishReason != "" {
		a.finish = ch.FinishReason
	}
	return nil
}

// reasoningText reads the delta's reasoning fragment: "reasoning_content"
// (DeepSeek, vLLM, llama.cpp) or else "reasoning" (OpenRouter, Ollama).
// openai-go keeps both among the delta's extra fields.
func reasoningText(d *oa.ChatCompletionChunkChoiceDelta, path string, line int) (text, field string, err error) {
	return reasoningFields(d.JSON.ExtraFields, path, line)
}

// reasoningFields reads "reasoning_content" or else "reasoning" from a
// delta's or a message's extra fields, and says which it was.
func reasoningFields(extra map[string]respjson.Field, path string, line int) (text, field string, err error) {
	for _, key := range [2]string{"reasoning_content", "reasoning"} {
		f, ok := extra[key]
		if !ok || f.Raw() == "null" || f.Raw() == "" {
			continue
		}
		var s string
		if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
			return "", "", malformed(line, fmt.Sprintf("%s.%s is not a string: %s", path, key, excerpt([]byte(f.Raw()))))
		}
		if s != "" {
			return s, key, nil
		}
	}
	return "", "", nil
}

// addCall folds one tool-call fragment in. Fragments are keyed by index; the
// id and name arrive with the first fragment of a call and the arguments in
// pieces. A fragment that brings an id different from its call's starts a
// new call even when its index repeats (Ollama from 0.4.7 to 0.20 puts
// index 0 on every parallel call). A fragment without an index (or with -1,
// as some servers send for a lone call) starts a new call when it brings a
// new id and continues the latest call otherwise. A numeric id (some
// llama.cpp forks) is read as its decimal text.
func (a *accumulator) addCall(tc *oa.ChatCompletionChunkChoiceDeltaToolCall, path string, line int) error {
	if !isObjectString(tc.RawJSON()) {
		return malformed(line, path+" is not an object")
	}
	if err := check(line, path+".index", tc.JSON.Index, "an integer"); err != nil {
		return err
	}
	id := tc.ID
	if raw := tc.JSON.ID.Raw(); !tc.JSON.ID.Valid() && isNumber(raw) {
		id = raw
	} else if err := check(line, path+".id", tc.JSON.ID, "a string"); err != nil {
		return err
	}
	if err := check(line, path+".function", tc.JSON.Function, "an object"); err != nil {
		return err
	}
	fn := &tc.Function
	if err := check(line, path+".function.name", fn.JSON.Name, "a string"); err != nil {
		return err
	}
	if err := check(line, path+".function.arguments", fn.JSON.Arguments, "a string"); err != nil {
		return err
	}

	var c *callAcc
	if tc.JSON.Index.Valid() && tc.Index >= 0 {
		if tc.Index >= maxToolCalls {
			return malformed(line, fmt.Sprintf("%s.index %d is out of range (at most %d tool calls)", path, tc.Index, maxToolCalls))
		}
		c = a.find(tc.Index)
		if c == nil || (id != "" && c.id != "" && id != c.id) {
			c = a.newCall(tc.Index)
		}
	} else {
		if tc.JSON.Index.Valid() && tc.Index != -1 {
			return malformed(line, fmt.Sprintf("%s.index %d is negative", path, tc.Index))
		}
		if n := len(a.calls); n > 0 && (id == "" || id == a.calls[n-1].id) {
			c = a.calls[n-1]
		} else {
			c = a.newCall(a.nextIndex())
		}
	}
	if c == nil {
		return malformed(line, fmt.Sprintf("more than %d tool calls", maxToolCalls))
	}
	if c.id == "" {
		c.id = id
	}
	switch name := fn.Name; {
	case name == "" || name == c.name:
		// Most servers send the name once; some repeat it with every fragment.
	default:
		c.name += name
	}
	c.args.WriteString(fn.Arguments)
	return nil
}

// find returns the latest call with the given index, or nil.
func (a *accumulator) find(index int64) *callAcc {
	for i := len(a.calls) - 1; i >= 0; i-- {
		if a.calls[i].index == index {
			return a.calls[i]
		}
	}
	return nil
}

// newCall adds a call with the given index, or returns nil when there are
// too many calls. Calls that share an index keep the order they came in.
func (a *accumulator) newCall(index int64) *callAcc {
	if len(a.calls) >= maxToolCalls {
		return nil
	}
	c := &callAcc{index: index}
	a.calls = append(a.calls, c)
	return c
}

func (a *accumulator) nextIndex() int64 {
	var next int64
	for _, c := range a.calls {
		if c.index >= next {
			next = c.index + 1
		}
	}
	return next
}

// addUsage keeps the chunk's usage when it has one. Servers send it on the
// last chunk, or cumulatively on every chunk; the last one seen wins.
func (a *accumulator) addUsage(c *oa.ChatCompletionChunk, line int) error {
	if err := check(line, "usage", c.JSON.Usage, "an object"); err != nil {
		return err
	}
	if !c.JSON.Usage.Valid() {
		return nil
	}
	u := &c.Usage
	fields := []struct {
		name string
		fld  respjson.Field
		v    int64
	}{
		{"usage.prompt_tokens", u.JSON.PromptTokens, u.PromptTokens},
		{"usage.completion_tokens", u.JSON.CompletionTokens, u.CompletionTokens},
		{"usage.prompt_tokens_details.cached_tokens", u.PromptTokensDetails.JSON.CachedTokens, u.PromptTokensDetails.CachedTokens},
		{"usage.completion_tokens_details.reasoning_tokens", u.CompletionTokensDetails.JSON.ReasoningTokens, u.CompletionTokensDetails.ReasoningTokens},
	}
	for _, f := range fields {
		if err := check(line, f.name, f.fld, "an integer"); err != nil {
			return err
		}
		if f.v < 0 {
			return malformed(line, fmt.Sprintf("%s is negative (%d)", f.name, f.v))
		}
	}
	a.usage = kernel.Usage{
		InputTokens:       u.PromptTokens,
		OutputTokens:      u.CompletionTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
	}
	// DeepSeek reports its cache hits at the top level of usage.
	if !u.PromptTokensDetails.JSON.CachedTokens.Valid() {
		if f, ok := u.JSON.ExtraFields["prompt_cache_hit_tokens"]; ok && f.Raw() != "null" {
			var n int64
			if err := json.Unmarshal([]byte(f.Raw()), &n); err != nil || n < 0 {
				return malformed(line, "usage.prompt_cache_hit_tokens is not a non-negative integer: "+excerpt([]byte(f.Raw())))
			}
			a.usage.CachedInputTokens = n
		}
	}
	return nil
}

// response is the assembled response, after [DONE].
func (a *accumulator) response() (kernel.Response, error) {
	if a.chunks == 0 {
		return kernel.Response{}, malformed(0, "the stream ended with [DONE] before any chunk")
	}
	if a.finish == "error" { // OpenRouter: the upstream failed mid-way, without an error member
		return kernel.Response{}, &kernel.ProviderError{Provider: Name, Code: "stream_error", Retryable: true,
			Message: fmt.Sprintf("the server ended the response with finish_reason \"error\" after %d chunks", a.chunks)}
	}
	msg := kernel.Message{
		Role:           kernel.RoleAssistant,
		Content:        a.text.String(),
		Reasoning:      a.reasoning.String(),
		ReasoningField: a.reasoningField,
	}
	if len(a.calls) > 0 {
		sort.SliceStable(a.calls, func(i, j int) bool { return a.calls[i].index < a.calls[j].index })
		msg.ToolCalls = make([]kernel.ToolCall, 0, len(a.calls))
		for _, c := range a.calls {
			args := c.args.String()
			if c.name == "" && strings.TrimSpace(args) == "" {
				// LM Studio (bug tracker 830) may end a text answer with an
				// empty tool_calls entry: no name, no arguments. Noise.
				a.logger().Debug("dropped an empty tool call (no name, no arguments)", "index", c.index, "id", c.id)
				continue
			}
			if c.name == "" {
				return kernel.Response{}, malformed(0, fmt.Sprintf("tool call %d (id %q) never got a function name", c.index, c.id))
			}
			msg.ToolCalls = append(msg.ToolCalls, kernel.ToolCall{ID: c.id, Name: a.names.Decode(c.name), Arguments: args})
		}
		if len(msg.ToolCalls) == 0 {
			msg.ToolCalls = nil
		}
	}
	return kernel.Response{Message: msg, Usage: a.usage, FinishReason: a.finish, Model: a.model}, nil
}

// check reports a field that is present but of the wrong JSON type; openai-go
// decodes leniently and only marks such fields invalid.
func check(line int, path string, f respjson.Field, want string) error {
	if f.Valid() {
		return nil
	}
	if raw := f.Raw(); raw != "" && raw != "null" {
		return malformed(line, fmt.Sprintf("%s must be %s, got %s", path, want, excerpt([]byte(raw))))
	}
	return nil
}

func isObject(data []byte) bool {
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// isNumber reports whether raw is a JSON number.
func isNumber(raw string) bool {
	var n json.Number
	return raw != "" && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && json.Unmarshal([]byte(raw), &n) == nil
}

func isObjectString(s string) bool {
	s = strings.TrimLeft(s, " \t\r\n")
	return s != "" && s[0] == '{'
}

// excerpt quotes the start of data for an error message.
func excerpt(data []byte) string {
	const max = 120
	if len(data) > max {
		return fmt.Sprintf("%q...", data[:max])
	}
	return fmt.Sprintf("%q", data)
}
