package main

import (
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
)

// openaiConfig is the openai provider's configuration from model.*.
func openaiConfig(m ModelConfig) openai.Config {
	cfg := openai.Config{
		BaseURL: m.BaseURL, APIKeyEnv: m.APIKeyEnv, IdleTimeout: m.IdleTimeout,
		Request: openai.RequestOptions{ParallelToolCalls: m.ParallelToolCalls, ToolChoice: m.ToolChoice, ReasoningEffort: m.ReasoningEffort},
	}
	if len(m.Overrides) > 0 {
		cfg.Models = make(map[string]openai.RequestOptions, len(m.Overrides))
		for name, o := range m.Overrides {
			cfg.Models[name] = openai.RequestOptions{ParallelToolCalls: o.ParallelToolCalls, ToolChoice: o.ToolChoice, ReasoningEffort: o.ReasoningEffort}
		}
	}
	return cfg
}

// retryPolicy is model.retry as the kernel takes it; zero fields keep the
// kernel's defaults.
func retryPolicy(r RetryConfig) kernel.RetryPolicy {
	return kernel.RetryPolicy{MaxAttempts: r.MaxAttempts, BaseDelay: r.BaseDelay, MaxDelay: r.MaxDelay,
		MaxRetryAfter: r.MaxRetryAfter, Budget: r.Budget}
}
