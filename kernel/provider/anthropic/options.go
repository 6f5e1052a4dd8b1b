package anthropic

import (
	"fmt"
	"regexp"
	"slices"
)

// DefaultMaxTokens is max_tokens when neither the configuration nor the
// wiring (the model catalog's max_output) sets it. The Messages API
// requires the field.
const DefaultMaxTokens = 8192

// MinThinkingBudget is the smallest budget_tokens the API accepts.
const MinThinkingBudget = 1024

// Thinking is the request's "thinking" object: extended thinking with a
// budget ("enabled"), the model's own choice ("adaptive"), none
// ("disabled"), or the server's default for the model (Type empty: the
// field is not sent).
type Thinking struct {
	// Type is "enabled", "adaptive", "disabled" or empty.
	Type string
	// BudgetTokens is budget_tokens for "enabled": at least
	// MinThinkingBudget and less than max_tokens.
	BudgetTokens int64
	// Display is "summarized" or "omitted" (the thinking text is left out
	// and only its signature comes back); empty sends nothing.
	Display string
}

// RequestOptions shape the request for one deployment or model. The zero
// value sends max_tokens (DefaultMaxTokens) and cache breakpoints, and
// leaves every optional field out.
type RequestOptions struct {
	// MaxTokens is max_tokens; zero means DefaultMaxTokens.
	MaxTokens int64
	// Thinking configures extended thinking; the zero value sends nothing.
	Thinking Thinking
	// Effort is sent as output_config.effort ("low", "medium", "high",
	// "xhigh", "max"); empty sends nothing. The kernel's reasoning_effort.
	Effort string
	// ToolChoice is sent with the tools as tool_choice: "auto", "none",
	// "required" (the API's "any"), "any", or the kernel name of a tool to
	// force it ("tool"); a named tool that is not offered in a turn sends
	// nothing that turn. Empty sends nothing.
	ToolChoice string
	// ParallelToolCalls, when false, sends disable_parallel_tool_use with
	// the tool choice; nil and true send nothing (the API allows parallel
	// calls by default).
	ParallelToolCalls *bool
	// Cache is "auto" (the default, empty) to place cache_control
	// breakpoints on the stable prefix, or "off" to send none.
	Cache string
	// CacheTTL is the breakpoints' ttl ("5m", "1h"); empty sends none
	// (the API's default, five minutes).
	CacheTTL string
}

// Efforts are the values Effort accepts.
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// check reports a bad option; where names the setting ("model",
// "model.overrides.claude-opus-4-5").
func (o RequestOptions) check(where string) error {
	if o.MaxTokens < 0 {
		return fmt.Errorf("anthropic: %s.max_tokens %d: must be positive", where, o.MaxTokens)
	}
	switch o.Thinking.Type {
	case "", "adaptive", "disabled":
		if o.Thinking.BudgetTokens != 0 {
			return fmt.Errorf("anthropic: %s.thinking.budget_tokens is set but thinking.type is %q: the budget needs type enabled", where, o.Thinking.Type)
		}
	case "enabled":
		if o.Thinking.BudgetTokens < MinThinkingBudget {
			return fmt.Errorf("anthropic: %s.thinking.budget_tokens %d: type enabled needs a budget of at least %d tokens", where, o.Thinking.BudgetTokens, MinThinkingBudget)
		}
	default:
		return fmt.Errorf("anthropic: %s.thinking.type %q: want enabled, adaptive or disabled", where, o.Thinking.Type)
	}
	switch o.Thinking.Display {
	case "", "summarized", "omitted":
	default:
		return fmt.Errorf("anthropic: %s.thinking.display %q: want summarized or omitted", where, o.Thinking.Display)
	}
	if o.Effort != "" && !slices.Contains(Efforts, o.Effort) {
		return fmt.Errorf("anthropic: %s.reasoning_effort %q: want one of %v", where, o.Effort, Efforts)
	}
	switch o.ToolChoice {
	case "", "auto", "none", "required", "any":
	default:
		if !toolNameRE.MatchString(o.ToolChoice) {
			return fmt.Errorf("anthropic: %s.tool_choice %q: want auto, none, required, any or a tool name", where, o.ToolChoice)
		}
	}
	switch o.Cache {
	case "", "auto", "off":
	default:
		return fmt.Errorf("anthropic: %s.cache %q: want auto or off", where, o.Cache)
	}
	switch o.CacheTTL {
	case "", "5m", "1h":
	default:
		return fmt.Errorf("anthropic: %s.cache_ttl %q: want 5m or 1h", where, o.CacheTTL)
	}
	return nil
}

// checkBudget reports a thinking budget that does not fit under max_tokens.
func (o RequestOptions) checkBudget(where string) error {
	if o.Thinking.Type == "enabled" && o.Thinking.BudgetTokens >= o.maxTokens() {
		return fmt.Errorf("anthropic: %s.thinking.budget_tokens %d must be less than max_tokens %d (thinking counts toward max_tokens)", where, o.Thinking.BudgetTokens, o.maxTokens())
	}
	return nil
}

func (o RequestOptions) maxTokens() int64 {
	if o.MaxTokens > 0 {
		return o.MaxTokens
	}
	return DefaultMaxTokens
}

// over returns o with every setting that p sets replaced by p's.
func (o RequestOptions) over(p RequestOptions) RequestOptions {
	if p.MaxTokens != 0 {
		o.MaxTokens = p.MaxTokens
	}
	if p.Thinking.Type != "" {
		o.Thinking = p.Thinking
	} else if p.Thinking.Display != "" {
		o.Thinking.Display = p.Thinking.Display
	}
	if p.Effort != "" {
		o.Effort = p.Effort
	}
	if p.ToolChoice != "" {
		o.ToolChoice = p.ToolChoice
	}
	if p.ParallelToolCalls != nil {
		o.ParallelToolCalls = p.ParallelToolCalls
	}
	if p.Cache != "" {
		o.Cache = p.Cache
	}
	if p.CacheTTL != "" {
		o.CacheTTL = p.CacheTTL
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
