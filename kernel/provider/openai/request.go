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
	"github.com/agentkernel/agentkernel/kernel/provider/openai/internal/toolname"
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

	msgs := make([]oa.ChatCompletionMessageParamUnion, 0, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case kernel.RoleSystem:
			msgs = append(msgs, oa.SystemMessage(m.Content))
		case kernel.RoleUser:
			msgs = append(msgs, oa.UserMessage(m.Content))
		case kernel.RoleAssistant:
			msgs = append(msgs, assistantMessage(m))
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
		params.ParallelToolCalls = oa.Bool(true)
	}
	return params, names, nil
}

// assistantMessage maps an assistant message. Reasoning is never sent back.
func assistantMessage(m kernel.Message) oa.ChatCompletionMessageParamUnion {
	var a oa.ChatCompletionAssistantMessageParam
	if m.Content != "" || len(m.ToolCalls) == 0 {
		a.Content.OfString = oa.String(m.Content)
	}
	if len(m.ToolCalls) > 0 {
		a.ToolCalls = make([]oa.ChatCompletionMessageToolCallUnionParam, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			args := tc.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}" // the kernel reads "" as {}; servers may not
			}
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
	return oa.ChatCompletionMessageParamUnion{OfAssistant: &a}
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
