package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
)

// buildParams maps a kernel request to chat completion parameters and
// returns the map that decodes the response's function names.
func buildParams(req kernel.Request) (oa.ChatCompletionNewParams, toolname.Map, error) {
	var params oa.ChatCompletionNewParams
	if req.Model == "" {
		return params, toolname.Map{}, errors.New("the request names no model (set model.name or --model)")
	}
	if len(req.Messages) == 0 {
		return params, toolname.Map{}, errors.New("the request has no messages")
	}

	offered := offeredNames(req.Tools)
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

	// Reasoning is echoed only within the current exchange: after the last
	// user message.
	lastUser := -1
	for i, m := range req.Messages {
		if m.Role == kernel.RoleUser {
			lastUser = i
		}
	}
	msgs := make([]oa.ChatCompletionMessageParamUnion, 0, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case kernel.RoleSystem:
			msgs = append(msgs, oa.SystemMessage(m.Content))
		case kernel.RoleUser:
			msgs = append(msgs, oa.UserMessage(m.Content))
		case kernel.RoleAssistant:
			msgs = append(msgs, assistantMessage(m, i > lastUser))
		case kernel.RoleTool:
			if m.ToolCallID == "" {
				return params, toolname.Map{}, fmt.Errorf("message %d: tool message (tool %q) has no tool_call_id", i, m.ToolName)
			}
			msgs = append(msgs, oa.ToolMessage(m.Content, m.ToolCallID))
		default:
			return params, toolname.Map{}, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}

	params = oa.ChatCompletionNewParams{
		Model:         req.Model,
		Messages:      msgs,
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
	}
	if len(req.Tools) > 0 { // no tools offered: no tools field at all
		params.Tools = make([]oa.ChatCompletionToolUnionParam, len(req.Tools))
		for i, t := range req.Tools {
			schema, err := parameters(t.Schema)
			if err != nil {
				return params, toolname.Map{}, fmt.Errorf("tool %s: schema: %w", t.Name, err)
			}
			fd := shared.FunctionDefinitionParam{Name: toolname.Encode(t.Name), Parameters: schema}
			if t.Description != "" {
				fd.Description = oa.String(t.Description)
			}
			params.Tools[i] = oa.ChatCompletionFunctionTool(fd)
		}
	}
	return params, names, nil
}

func offeredNames(tools []kernel.ToolSpec) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names
}

// assistantMessage maps an assistant message. Its reasoning is sent back
// only when it has tool calls and belongs to the current exchange (echo),
// in the field it arrived in: DeepSeek's thinking mode answers 400 when the
// reasoning_content of a tool-calling turn is missing, and servers that do
// not need it ignore it. Arguments that are not a JSON object are sent as
// one that quotes them (see argumentsForWire).
func assistantMessage(m kernel.Message, echo bool) oa.ChatCompletionMessageParamUnion {
	var a oa.ChatCompletionAssistantMessageParam
	if m.Content != "" || len(m.ToolCalls) == 0 {
		a.Content.OfString = oa.String(m.Content)
	}
	if len(m.ToolCalls) > 0 {
		a.ToolCalls = make([]oa.ChatCompletionMessageToolCallUnionParam, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			args := argumentsForWire(tc.Arguments)
			a.ToolCalls[i] = oa.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      toolname.Encode(tc.Name),
						Arguments: args,
					},
				},
			}
		}
	}
	if echo && m.Reasoning != "" && len(m.ToolCalls) > 0 {
		field := m.ReasoningField
		if field != "reasoning" {
			field = "reasoning_content"
		}
		a.SetExtraFields(map[string]any{field: m.Reasoning})
	}
	return oa.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// invalidArguments is what is sent back in place of arguments that are not
// a JSON object. The history keeps what the model sent; strict servers
// (Ollama, vLLM with some templates) parse the history's arguments and
// answer 400 to anything but an object.
type invalidArguments struct {
	Error string `json:"error"`
	Sent  string `json:"arguments_as_sent"`
}

// argumentsForWire is a call's arguments as they go back to the server: as
// the model sent them when they are a JSON object, {} when empty (the
// kernel reads empty as {}), and otherwise an object with an error note
// that quotes them.
func argumentsForWire(args string) string {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return "{}"
	}
	if trimmed[0] == '{' && json.Valid([]byte(trimmed)) {
		return args
	}
	b, err := json.Marshal(invalidArguments{Error: "these arguments were not a valid JSON object, so the call was not run", Sent: args})
	if err != nil { // unreachable: two strings always marshal
		return "{}"
	}
	return string(b)
}

// parameters turns a tool's JSON Schema into the function's "parameters".
// Each member stays raw JSON, so the schema goes out exactly as written
// (openai-go would send a json.Number as a string, and float64 loses
// precision).
func parameters(schema json.RawMessage) (shared.FunctionParameters, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(schema, &members); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if members == nil {
		return nil, errors.New("not a JSON object: null")
	}
	params := make(shared.FunctionParameters, len(members))
	for k, v := range members {
		params[k] = v
	}
	return params, nil
}
