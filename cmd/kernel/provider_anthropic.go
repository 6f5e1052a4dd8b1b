package main

import (
	"context"
	"fmt"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/catalog"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
)

// anthropicOptions is one model's request shaping from model.* (or an
// override's keys). maxOutput is the catalog's max_output for it, the
// default max_tokens.
func anthropicOptions(maxTokens int64, t ThinkingConfig, effort, toolChoice string, parallel *bool, cache, ttl string) anthropic.RequestOptions {
	return anthropic.RequestOptions{MaxTokens: maxTokens,
		Thinking: anthropic.Thinking{Type: t.Type, BudgetTokens: t.BudgetTokens, Display: t.Display},
		Effort:   effort, ToolChoice: toolChoice, ParallelToolCalls: parallel, Cache: cache, CacheTTL: ttl}
}

// anthropicConfig is the anthropic provider's configuration from model.*.
// A model without max_tokens of its own gets its catalog's max_output.
func anthropicConfig(m ModelConfig, cat *catalog.Catalog) anthropic.Config {
	cfg := anthropic.Config{BaseURL: m.BaseURL, APIKeyEnv: m.APIKeyEnv, IdleTimeout: m.IdleTimeout,
		Request: anthropicOptions(m.MaxTokens, m.Thinking, m.ReasoningEffort, m.ToolChoice, m.ParallelToolCalls, m.Cache, m.CacheTTL)}
	cfg.Models = map[string]anthropic.RequestOptions{}
	for _, name := range append([]string{m.Name}, m.Fallbacks...) {
		o := m.Overrides[name]
		opts := anthropicOptions(o.MaxTokens, o.Thinking, o.ReasoningEffort, o.ToolChoice, o.ParallelToolCalls, "", "")
		if opts.MaxTokens == 0 && m.MaxTokens == 0 && cat != nil {
			if e, ok := cat.Lookup(name); ok && e.MaxOutput > 0 {
				opts.MaxTokens = int64(e.MaxOutput)
			}
		}
		if opts != (anthropic.RequestOptions{}) {
			cfg.Models[name] = opts
		}
	}
	for name, o := range m.Overrides {
		if _, done := cfg.Models[name]; done {
			continue
		}
		if opts := anthropicOptions(o.MaxTokens, o.Thinking, o.ReasoningEffort, o.ToolChoice, o.ParallelToolCalls, "", ""); opts != (anthropic.RequestOptions{}) {
			cfg.Models[name] = opts
		}
	}
	return cfg
}

// providerOf is the API that serves a model: its override's provider,
// else model.provider (openai when unset).
func (m ModelConfig) providerOf(name string) string {
	if p := m.Overrides[name].Provider; p != "" {
		return p
	}
	if m.Provider == "" {
		return openai.Name
	}
	return m.Provider
}

// apiProvider builds the provider for one API. m is model.* with, for a
// model on another API than model.provider, that model's base_url and
// api_key_env in place of the model-wide ones.
func (a *app) apiProvider(name string, m ModelConfig, cat *catalog.Catalog) (kernel.Provider, error) {
	// Each provider checks the overrides of its own models only: an effort
	// one API accepts may be one the other refuses.
	own := map[string]ModelOverride{}
	for model, o := range a.cfg.Model.Overrides {
		if a.cfg.Model.providerOf(model) == name || name == "" && a.cfg.Model.providerOf(model) == openai.Name {
			own[model] = o
		}
	}
	m.Overrides = own
	switch name {
	case anthropic.Name:
		ac := anthropicConfig(m, cat)
		ac.HTTPClient = a.httpClient()
		if a.log != nil {
			ac.Logger = a.log.Named("anthropic")
		}
		return anthropic.New(ac)
	case openai.Name, "":
		oc := openaiConfig(m)
		oc.HTTPClient = a.httpClient()
		if a.log != nil {
			oc.Logger = a.log.Named("openai")
		}
		return openai.New(oc)
	}
	return nil, &ConfigError{File: a.cfg.source(), Field: "model.provider", Err: fmt.Errorf("unknown provider %q (want openai, anthropic or scripted)", name)}
}

// apiProviders builds model.provider's provider and, when a fallback or
// the compaction model is served by another API (its override's
// provider), one for that API too, routing each request by its model.
func (a *app) apiProviders() (kernel.Provider, error) {
	m := a.cfg.Model
	var cat *catalog.Catalog
	if ms, err := a.model(); err == nil {
		cat = ms.catalog
	}
	main, err := a.apiProvider(m.providerOf(m.Name), m, cat)
	if err != nil {
		return nil, err
	}
	others := append(append([]string(nil), m.Fallbacks...), a.cfg.Compaction.Model)
	var route map[string]kernel.Provider
	for _, name := range others {
		p := m.providerOf(name)
		if name == "" || p == m.providerOf(m.Name) {
			continue
		}
		o := m.Overrides[name]
		om := m
		om.Provider, om.BaseURL, om.APIKeyEnv = p, o.BaseURL, o.APIKeyEnv
		prov, err := a.apiProvider(p, om, cat)
		if err != nil {
			return nil, fmt.Errorf("%s: model.overrides.%s: %w", a.cfg.source(), name, err)
		}
		if route == nil {
			route = map[string]kernel.Provider{}
		}
		route[name] = prov
	}
	if route == nil {
		return main, nil
	}
	return &routedProvider{main: main, byModel: route}, nil
}

// routedProvider sends each request to the provider of its model: a
// fallback may be served by another API than the configured model. Safe
// for concurrent use (its providers are).
type routedProvider struct {
	main    kernel.Provider
	byModel map[string]kernel.Provider
}

// Stream implements kernel.Provider.
func (r *routedProvider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	if p, ok := r.byModel[req.Model]; ok {
		return p.Stream(ctx, req, emit)
	}
	return r.main.Stream(ctx, req, emit)
}

var _ kernel.Provider = (*routedProvider)(nil)
