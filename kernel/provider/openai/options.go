package openai

import (
	"fmt"
	"regexp"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
)

// RequestOptions shape the request for one deployment or model. The zero
// value sends none of these fields, so each server uses its own default.
type RequestOptions struct {
	// ParallelToolCalls, when set, is sent as "parallel_tool_calls" with the
	// tools of a turn that offers any. Nil sends nothing: OpenAI's o-series
	// reasoning models answer 400 unsupported_parameter to the field, and
	// every server that supports parallel calls allows them by default.
	ParallelToolCalls *bool
	// ToolChoice is sent as "tool_choice" with the tools: "auto", "none",
	// "required", or the name of a tool (the kernel's name, such as
	// "fs.read") to force that tool; a named tool that is not offered in a
	// turn sends nothing that turn. Empty sends nothing.
	ToolChoice string
	// ReasoningEffort is sent as "reasoning_effort" ("none", "minimal",
	// "low", "medium", "high", "xhigh"). Empty sends nothing.
	ReasoningEffort string
}

// ReasoningEfforts are the values ReasoningEffort accepts.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// check reports a bad option; where names the setting ("model",
// "model.overrides.o3-mini").
func (o RequestOptions) check(where string) error {
	switch o.ToolChoice {
	case "", "auto", "none", "required":
	default:
		if !toolNameRE.MatchString(o.ToolChoice) {
			return fmt.Errorf("openai: %s.tool_choice %q: want auto, none, required or a tool name", where, o.ToolChoice)
		}
	}
	if o.ReasoningEffort != "" {
		ok := false
		for _, e := range ReasoningEfforts {
			ok = ok || e == o.ReasoningEffort
		}
		if !ok {
			return fmt.Errorf("openai: %s.reasoning_effort %q: want one of %v", where, o.ReasoningEffort, ReasoningEfforts)
		}
	}
	return nil
}

// over returns o with every setting that p sets replaced by p's.
func (o RequestOptions) over(p RequestOptions) RequestOptions {
	if p.ParallelToolCalls != nil {
		o.ParallelToolCalls = p.ParallelToolCalls
	}
	if p.ToolChoice != "" {
		o.ToolChoice = p.ToolChoice
	}
	if p.ReasoningEffort != "" {
		o.ReasoningEffort = p.ReasoningEffort
	}
	return o
}

// options are the request options for model: the defaults with the
// model's own overrides laid over them.
func (p *Provider) options(model string) RequestOptions {
	if m, ok := p.models[model]; ok {
		return p.defaults.over(m)
	}
	return p.defaults
}

// apply sets the shaping fields of params. offered says whether the request
// offers tools (tool_choice and parallel_tool_calls go only with tools).
func (o RequestOptions) apply(params *oa.ChatCompletionNewParams, offered []string) {
	if o.ReasoningEffort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(o.ReasoningEffort)
	}
	if len(offered) == 0 {
		return
	}
	if o.ParallelToolCalls != nil {
		params.ParallelToolCalls = oa.Bool(*o.ParallelToolCalls)
	}
	switch o.ToolChoice {
	case "":
	case "auto", "none", "required":
		params.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String(o.ToolChoice)}
	default:
		for _, name := range offered {
			if name == o.ToolChoice {
				params.ToolChoice = oa.ToolChoiceOptionFunctionToolChoice(oa.ChatCompletionNamedToolChoiceFunctionParam{Name: toolname.Encode(name)})
				break
			}
		}
	}
}
