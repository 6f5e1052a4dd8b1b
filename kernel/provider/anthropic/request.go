package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
)

// maxBreakpoints is how many cache_control breakpoints one request may
// carry (the API refuses a fifth).
const maxBreakpoints = 4

// buildParams maps a kernel request to Messages API parameters and returns
// the map that decodes the response's tool names.
//
// System messages become the system blocks; the compaction summary the
// kernel appends to the system prompt becomes a block of its own. Tool
// messages become tool_result blocks, the results of one round in one
// user message. An assistant message gets back its reasoning blocks where
// they were, exactly as they came. With caching on, cache_control
// breakpoints go on the last tool, the system prompt, the summary, and
// the last blocks of the latest user messages, at most four in all.
func buildParams(req kernel.Request, o RequestOptions) (sdk.MessageNewParams, toolname.Map, error) {
	var params sdk.MessageNewParams
	if req.Model == "" {
		return params, toolname.Map{}, errors.New("the request names no model (set model.name or --model)")
	}
	if len(req.Messages) == 0 {
		return params, toolname.Map{}, errors.New("the request has no messages")
	}
	offered := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		offered[i] = t.Name
	}
	var history []string
	for _, m := range req.Messages {
		for _, tc := range m.ToolCalls {
			history = append(history, tc.Name)
		}
	}
	names, err := toolname.NewMap(offered, history)
	if err != nil {
		return params, toolname.Map{}, err
	}

	var system []sdk.TextBlockParam
	summary := -1 // the summary's system block
	var msgs []sdk.MessageParam
	ids := callIDs{}
	for i, m := range req.Messages {
		switch m.Role {
		case kernel.RoleSystem:
			if len(msgs) > 0 {
				return params, toolname.Map{}, fmt.Errorf("message %d: a system message after the conversation started", i)
			}
			prompt, sum := splitSummary(m.Content)
			if prompt != "" {
				system = append(system, sdk.TextBlockParam{Text: prompt})
			}
			if sum != "" {
				summary = len(system)
				system = append(system, sdk.TextBlockParam{Text: sum})
			}
		case kernel.RoleUser:
			if m.Content == "" {
				continue // the API refuses empty text blocks
			}
			msgs = appendUser(msgs, sdk.NewTextBlock(m.Content))
		case kernel.RoleTool:
			if m.ToolCallID == "" {
				return params, toolname.Map{}, fmt.Errorf("message %d: tool message (tool %q) has no tool_call_id", i, m.ToolName)
			}
			r := sdk.ToolResultBlockParam{ToolUseID: ids.wire(m.ToolCallID)}
			if m.Content != "" {
				r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			if m.IsError {
				r.IsError = param.NewOpt(true)
			}
			msgs = appendUser(msgs, sdk.ContentBlockParamUnion{OfToolResult: &r})
		case kernel.RoleAssistant:
			blocks, err := assistantBlocks(m, ids.wire)
			if err != nil {
				return params, toolname.Map{}, fmt.Errorf("message %d: %w", i, err)
			}
			if len(blocks) == 0 {
				continue
			}
			msgs = append(msgs, sdk.MessageParam{OfAssistant: &sdk.AssistantMessageParam{Content: blocks}})
		default:
			return params, toolname.Map{}, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	if len(msgs) == 0 {
		return params, toolname.Map{}, errors.New("the request has no user or assistant message")
	}

	params = sdk.MessageNewParams{
		Model:     sdk.Model(req.Model),
		MaxTokens: o.maxTokens(),
		Messages:  msgs,
		System:    system,
	}
	if len(req.Tools) > 0 { // no tools offered: no tools field at all
		params.Tools = make([]sdk.ToolUnionParam, len(req.Tools))
		for i, t := range req.Tools {
			schema, err := inputSchema(t.Schema)
			if err != nil {
				return params, toolname.Map{}, fmt.Errorf("tool %s: schema: %w", t.Name, err)
			}
			tp := &sdk.ToolParam{Name: toolname.Encode(t.Name), InputSchema: schema}
			if t.Description != "" {
				tp.Description = param.NewOpt(t.Description)
			}
			params.Tools[i] = sdk.ToolUnionParam{OfTool: tp}
		}
		params.ToolChoice = o.toolChoice(offered)
	}
	switch o.Thinking.Type {
	case "enabled":
		params.Thinking = sdk.ThinkingConfigParamUnion{OfEnabled: &sdk.ThinkingConfigEnabledParam{
			BudgetTokens: o.Thinking.BudgetTokens, Display: sdk.ThinkingConfigEnabledDisplay(o.Thinking.Display)}}
	case "adaptive":
		params.Thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{
			Display: sdk.ThinkingConfigAdaptiveDisplay(o.Thinking.Display)}}
	case "disabled":
		params.Thinking = sdk.ThinkingConfigParamUnion{OfDisabled: &sdk.ThinkingConfigDisabledParam{}}
	}
	if o.Effort != "" {
		params.OutputConfig.Effort = sdk.OutputConfigEffort(o.Effort)
	}
	if o.Cache != "off" {
		breakpoints(&params, summary, o.CacheTTL)
	}
	return params, names, nil
}

// splitSummary splits a system message into the system prompt and the
// compaction summary the kernel joined to it (kernel.SummaryPrefix), so
// that each is a block of its own and the prompt stays cached when a new
// summary replaces the old one.
func splitSummary(s string) (prompt, summary string) {
	if strings.HasPrefix(s, kernel.SummaryPrefix) {
		return "", s
	}
	if i := strings.LastIndex(s, "\n\n"+kernel.SummaryPrefix); i >= 0 {
		return s[:i], s[i+2:]
	}
	return s, ""
}

// appendUser adds a block to the last message when it is a user message,
// or as a new user message: the results of a round share one message, and
// a tool_result is always the first thing after its tool_use.
func appendUser(msgs []sdk.MessageParam, b sdk.ContentBlockParamUnion) []sdk.MessageParam {
	if n := len(msgs); n > 0 && msgs[n-1].OfUser != nil {
		u := msgs[n-1].OfUser
		u.Content = append(u.Content, b)
		return msgs
	}
	return append(msgs, sdk.MessageParam{OfUser: &sdk.UserMessageParam{Content: []sdk.ContentBlockParamUnion{b}}})
}

// assistantBlocks is an assistant message's content: its text, then its
// tool calls, with its reasoning blocks back at the positions they had.
// wireID maps a call id to the one sent.
func assistantBlocks(m kernel.Message, wireID func(string) string) ([]sdk.ContentBlockParamUnion, error) {
	var blocks []sdk.ContentBlockParamUnion
	if m.Content != "" {
		blocks = append(blocks, sdk.NewTextBlock(m.Content))
	}
	for _, tc := range m.ToolCalls {
		blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{
			ID: wireID(tc.ID), Name: toolname.Encode(tc.Name), Input: argumentsForWire(tc.Arguments)}})
	}
	var rbs []kernel.ReasoningBlock
	for _, rb := range m.ReasoningBlocks {
		if rb.Provider == Name {
			rbs = append(rbs, rb)
		}
	}
	slices.SortStableFunc(rbs, func(a, b kernel.ReasoningBlock) int { return a.Index - b.Index })
	for j, rb := range rbs {
		var tb thinkingBlock
		if err := json.Unmarshal(rb.Data, &tb); err != nil {
			return nil, fmt.Errorf("reasoning block %d is not an anthropic block: %v", j, err)
		}
		var b sdk.ContentBlockParamUnion
		switch tb.Type {
		case "thinking":
			b = sdk.NewThinkingBlock(tb.Signature, tb.Thinking)
		case "redacted_thinking":
			b = sdk.NewRedactedThinkingBlock(tb.Data)
		default:
			return nil, fmt.Errorf("reasoning block %d has type %q, want thinking or redacted_thinking", j, tb.Type)
		}
		at := min(max(rb.Index, 0), len(blocks))
		blocks = slices.Insert(blocks, at, b)
	}
	return blocks, nil
}

// invalidArguments is what is sent back in place of arguments that are not
// a JSON object: tool_use.input must be one.
type invalidArguments struct {
	Error string `json:"error"`
	Sent  string `json:"arguments_as_sent"`
}

// argumentsForWire is a call's input as it goes back: the model's own JSON
// object, {} when empty, and otherwise an object with an error note that
// quotes what the model sent.
func argumentsForWire(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage("{}")
	}
	if trimmed[0] == '{' && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	b, _ := json.Marshal(invalidArguments{Error: "these arguments were not a valid JSON object, so the call was not run", Sent: args})
	return b
}

// inputSchema is a tool's JSON Schema as input_schema, sent exactly as
// written.
func inputSchema(schema json.RawMessage) (sdk.ToolInputSchemaParam, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return param.Override[sdk.ToolInputSchemaParam](json.RawMessage(`{"type":"object","properties":{}}`)), nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(schema, &members); err != nil {
		return sdk.ToolInputSchemaParam{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if members == nil {
		return sdk.ToolInputSchemaParam{}, errors.New("not a JSON object: null")
	}
	return param.Override[sdk.ToolInputSchemaParam](schema), nil
}

// toolChoice is the tool_choice for a turn offering the named tools.
func (o RequestOptions) toolChoice(offered []string) sdk.ToolChoiceUnionParam {
	var disable param.Opt[bool]
	if o.ParallelToolCalls != nil && !*o.ParallelToolCalls {
		disable = param.NewOpt(true)
	}
	switch o.ToolChoice {
	case "", "auto":
		if o.ToolChoice == "" && !disable.Valid() {
			return sdk.ToolChoiceUnionParam{}
		}
		return sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{DisableParallelToolUse: disable}}
	case "none":
		return sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case "required", "any":
		return sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{DisableParallelToolUse: disable}}
	}
	if slices.Contains(offered, o.ToolChoice) {
		return sdk.ToolChoiceUnionParam{OfTool: &sdk.ToolChoiceToolParam{Name: toolname.Encode(o.ToolChoice), DisableParallelToolUse: disable}}
	}
	if disable.Valid() {
		return sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{DisableParallelToolUse: disable}}
	}
	return sdk.ToolChoiceUnionParam{}
}

// breakpoints puts cache_control on the stable prefix, at most four: the
// last tool (tools change when the policy's surface does), the system
// prompt, the compaction summary, and then the last block of the latest
// user messages, newest first. The API caches the prefix up to each
// breakpoint; the next request, which extends the history, reads the
// longest cached prefix and writes what is new.
func breakpoints(params *sdk.MessageNewParams, summary int, ttl string) {
	cc := sdk.NewCacheControlEphemeralParam() // the zero value would be left out
	cc.TTL = sdk.CacheControlEphemeralTTL(ttl)
	left := maxBreakpoints
	if n := len(params.Tools); n > 0 {
		params.Tools[n-1].OfTool.CacheControl = cc
		left--
	}
	if n := len(params.System); n > 0 {
		prompt := n - 1
		if summary >= 0 {
			params.System[summary].CacheControl = cc
			left--
			prompt = summary - 1
		}
		if prompt >= 0 {
			params.System[prompt].CacheControl = cc
			left--
		}
	}
	for i := len(params.Messages) - 1; i >= 0 && left > 0; i-- {
		u := params.Messages[i].OfUser
		if u == nil || len(u.Content) == 0 {
			continue
		}
		switch b := u.Content[len(u.Content)-1]; {
		case b.OfText != nil:
			b.OfText.CacheControl = cc
		case b.OfToolResult != nil:
			b.OfToolResult.CacheControl = cc
		default:
			continue
		}
		left--
	}
}

// callIDs maps the kernel's call ids to ids the API accepts
// (^[a-zA-Z0-9_-]+$): an id from another provider's history may have
// other characters. The mapping is a function of the id, so a tool_use
// and its tool_result always agree.
type callIDs struct{}

func (callIDs) wire(id string) string {
	ok := id != ""
	for i := 0; i < len(id) && ok; i++ {
		c := id[i]
		ok = c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if ok {
		return id
	}
	var b strings.Builder
	for i := 0; i < len(id) && b.Len() < 48; i++ {
		c := id[i]
		if c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(id))
	return b.String() + "_" + hex.EncodeToString(sum[:4])
}
