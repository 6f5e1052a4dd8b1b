package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/agents"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/catalog"
	"github.com/agentkernel/agentkernel/policy"
	"github.com/agentkernel/agentkernel/serve"
)

// Named agents and pipelines (docs/agents.md): agents: and pipelines: in
// kernel.yaml are decoded and checked when the app loads (loadAgents),
// so a bad one is refused before anything runs; app.kernel builds a
// kernel.Kernel for each agent, callees first, each with a registry
// holding its own surface (the registered tools it names, and the agents
// it names as agent.<name> tools), and one for each pipeline, whose model
// is the agents.Provider that plays it.

// agentSetup is what loadAgents read: the checked configuration and each
// agent's own policy (policy:), by agent name.
type agentSetup struct {
	cfg      *agents.Config
	policies map[string]kernel.Policy
	// kernels and pipelines are built by app.kernel.
	kernels   map[string]*kernel.Kernel
	pipelines map[string]*kernel.Kernel
}

// agentsConfig decodes agents: and pipelines:.
func (cfg *Config) agentsConfig() (*agents.Config, error) {
	return agents.Decode(cfg.agentsFile, &cfg.Agents, cfg.pipelinesFile, &cfg.Pipelines)
}

// loadAgents decodes and checks agents: and pipelines: against the
// registered tools and the models the configuration knows, and loads the
// agents' own policies. It runs after loadTools and loadPolicy.
func (a *app) loadAgents(ctx context.Context) error {
	ac, err := a.cfg.agentsConfig()
	if err != nil {
		return err
	}
	if len(ac.Agents) == 0 && len(ac.Pipelines) == 0 {
		return nil
	}
	var toolNames []string
	for _, s := range a.tools.Specs() {
		toolNames = append(toolNames, s.Name)
	}
	known, err := a.knownModel()
	if err != nil {
		return err
	}
	env := agents.Env{Tools: toolNames, Provider: a.cfg.Model.Provider, KnownModel: known, MaxDepth: a.cfg.Limits.MaxAgentDepth, MemoryScope: a.cfg.memoryScope()}
	if err := ac.Check(env); err != nil {
		return err
	}
	a.agents = &agentSetup{cfg: ac, policies: map[string]kernel.Policy{}}
	for _, ag := range ac.Agents {
		if ag.SystemPromptFile != "" {
			b, err := os.ReadFile(ag.SystemPromptFile)
			if err != nil {
				return &ConfigError{File: ac.File, Line: ag.At.Line, Column: ag.At.Col, Kind: "agent", Name: ag.Name, Field: "system_prompt_file", Err: err}
			}
			ag.SystemPrompt = string(b)
		}
		if ag.Policy == "" {
			continue
		}
		w, err := policy.NewWatcher(ctx, policy.WatcherConfig{Path: ag.Policy, Options: policyOptions(a.cfg, a.surface(ag)),
			OnReload: func(e policy.ReloadEvent) { a.emit(e.Event()) }})
		if err != nil {
			return &ConfigError{File: ac.File, Line: ag.PolicyAt.Line, Column: ag.PolicyAt.Col, Kind: "agent", Name: ag.Name, Field: "policy", Err: policyCancelled(err)}
		}
		if err := w.Start(); err != nil {
			return fmt.Errorf("watch policy %s: %w", ag.Policy, err)
		}
		a.closers = append(a.closers, w.Close)
		a.agents.policies[ag.Name] = w
	}
	return nil
}

// knownModel reports whether the configuration knows a model name: the
// catalog's, model.prices', model.overrides', model.fallbacks' and
// model.name.
func (a *app) knownModel() (func(string) bool, error) {
	var files []string
	if a.cfg.Model.Catalog != "" {
		files = append(files, a.cfg.path(a.cfg.Model.Catalog))
	}
	cat, err := catalog.Load(files...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.cfg.source(), err)
	}
	m := a.cfg.Model
	return func(name string) bool {
		if _, ok := cat.Lookup(name); ok || name == m.Name {
			return true
		}
		if _, ok := m.Prices[name]; ok {
			return true
		}
		if _, ok := m.Overrides[name]; ok {
			return true
		}
		for _, f := range m.Fallbacks {
			if f == name {
				return true
			}
		}
		return false
	}, nil
}

// surface is the specs of the registered tools agent ag may call (its
// agent tools are added when the kernels are built).
func (a *app) surface(ag *agents.Agent) []kernel.ToolSpec {
	var out []kernel.ToolSpec
	for _, r := range ag.Tools {
		if t, ok := a.tools.Lookup(r.Name); ok {
			out = append(out, t.Spec())
		}
	}
	return out
}

// buildAgents builds a kernel for each agent, callees first, and one for
// each pipeline, on base (the configuration's kernel's Config).
func (a *app) buildAgents(base kernel.Config) error {
	s := a.agents
	if s == nil {
		return nil
	}
	s.kernels = map[string]*kernel.Kernel{}
	s.pipelines = map[string]*kernel.Kernel{}
	tiers := map[string]kernel.Tier{}
	var build func(ag *agents.Agent) error
	build = func(ag *agents.Agent) error {
		if _, ok := s.kernels[ag.Name]; ok {
			return nil
		}
		reg := kernel.NewRegistry()
		tier := kernel.TierReadOnly
		for _, r := range ag.Tools {
			if n, ok := strings.CutPrefix(r.Name, kernel.AgentToolPrefix); ok {
				callee := s.cfg.Agent(n)
				if err := build(callee); err != nil {
					return err
				}
				t, err := a.agentTool(callee, s.kernels[n], tiers[n])
				if err != nil {
					return err
				}
				if err := reg.Register(t); err != nil {
					return err
				}
				tier = maxTier(tier, tiers[n])
				continue
			}
			t, ok := a.tools.Lookup(r.Name)
			if !ok { // Check saw every name registered
				return fmt.Errorf("agent %s: tool %s is not registered", ag.Name, r.Name)
			}
			if err := reg.Register(t); err != nil {
				return err
			}
			tier = maxTier(tier, t.Spec().Tier)
		}
		tiers[ag.Name] = tier
		kc := base
		kc.Tools = reg
		kc.Agent = ag.Name
		kc.SystemPrompt = ag.SystemPrompt
		kc.Budget = ag.Budget
		if ag.MaxTurns > 0 {
			kc.MaxTurns = ag.MaxTurns
		}
		if p, ok := s.policies[ag.Name]; ok {
			kc.Policy = p
		}
		if ag.Model != nil {
			if err := a.agentModel(ag, &kc); err != nil {
				return err
			}
		}
		k, err := kernel.New(kc)
		if err != nil {
			return fmt.Errorf("agent %s: %w", ag.Name, err)
		}
		s.kernels[ag.Name] = k
		return nil
	}
	for _, ag := range s.cfg.Agents {
		if err := build(ag); err != nil {
			return err
		}
	}
	for _, p := range s.cfg.Pipelines {
		reg := kernel.NewRegistry()
		for _, st := range p.Steps() {
			if _, ok := reg.Lookup(kernel.AgentToolPrefix + st.Agent); ok {
				continue
			}
			t, err := a.agentTool(s.cfg.Agent(st.Agent), s.kernels[st.Agent], tiers[st.Agent])
			if err != nil {
				return err
			}
			if err := reg.Register(t); err != nil {
				return err
			}
		}
		kc := base
		kc.Provider = agents.NewProvider(p)
		if a.tel != nil {
			kc.Provider = a.tel.Provider(kc.Provider)
		}
		kc.Model = "pipeline"
		kc.Tools = reg
		kc.Agent = agents.SessionAgent(p.Name)
		kc.SystemPrompt = ""
		kc.Budget = p.Budget
		kc.MaxTurns = len(p.Stages) + 1
		kc.Fallbacks = nil
		kc.ModelTools = nil
		k, err := kernel.New(kc)
		if err != nil {
			return fmt.Errorf("pipeline %s: %w", p.Name, err)
		}
		s.pipelines[p.Name] = k
	}
	return nil
}

// syncAgents follows a change of a tool source (a hot reload of declared
// tools, an MCP server's list_changed) into each named agent's registry:
// of source's tools, those the agent names, as the source has them now (a
// tool the source dropped is dropped from the agent too). The tier an
// agent's own tool shows its callers was fixed at start.
func (a *app) syncAgents(source string, tools []kernel.Tool) []error {
	if a.agents == nil || a.agents.kernels == nil {
		return nil
	}
	var errs []error
	for _, ag := range a.agents.cfg.Agents {
		k := a.agents.kernels[ag.Name]
		if k == nil {
			continue
		}
		var mine []kernel.Tool
		for _, t := range tools {
			if slices.ContainsFunc(ag.Tools, func(r agents.Ref) bool { return r.Name == t.Spec().Name }) {
				mine = append(mine, t)
			}
		}
		for _, err := range k.Tools().Sync(source, mine) {
			errs = append(errs, fmt.Errorf("agent %s: %w", ag.Name, err))
		}
	}
	return errs
}

// agentTool is agent ag, run by k, as the tool agent.<name>.
func (a *app) agentTool(ag *agents.Agent, k *kernel.Kernel, tier kernel.Tier) (kernel.Tool, error) {
	return kernel.AgentTool(kernel.Agent{Name: ag.Name, Description: ag.Description, Kernel: k, Tier: tier, Timeout: ag.Timeout})
}

// agentModel sets kc's provider and model to agent ag's model: a name on
// the configuration's provider, or a model section laid over model:.
func (a *app) agentModel(ag *agents.Agent, kc *kernel.Config) error {
	mc := a.cfg.Model
	if len(ag.Model.Content) == 0 {
		mc.Name = ag.Model.Value
		if mc.Provider != "scripted" {
			kc.Model = mc.Name
			return nil
		}
	} else if err := ag.Model.Decode(&mc); err != nil {
		return &ConfigError{File: a.agents.cfg.File, Line: ag.ModelAt.Line, Column: ag.ModelAt.Col, Kind: "agent", Name: ag.Name, Field: "model", Err: err}
	}
	cfg := *a.cfg
	cfg.Model = mc
	sub := &app{cfg: &cfg, log: a.log, tel: a.tel, stderr: a.stderr}
	prov, err := sub.provider()
	if err != nil {
		return fmt.Errorf("agent %s: model: %w", ag.Name, err)
	}
	ms, err := sub.model()
	if err != nil {
		return fmt.Errorf("agent %s: model: %w", ag.Name, err)
	}
	if a.tel != nil {
		prov = a.tel.Provider(prov)
	}
	kc.Provider = prov
	kc.Model = mc.Name
	kc.ContextWindow = ms.window
	kc.Tokenizer = ms.tokenizer
	kc.ModelTools = ms.protocols
	kc.Fallbacks = mc.Fallbacks
	for n, p := range ms.prices {
		if _, ok := kc.Prices[n]; !ok {
			if kc.Prices == nil {
				kc.Prices = map[string]kernel.Price{}
			}
			kc.Prices[n] = p
		}
	}
	return nil
}

func maxTier(a, b kernel.Tier) kernel.Tier {
	rank := map[kernel.Tier]int{kernel.TierReadOnly: 0, kernel.TierSideEffecting: 1, kernel.TierPrivileged: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// selectKernel returns the kernel a run uses: agent's (--agent), or
// pipeline's (--pipeline), or k, the configuration's.
func (a *app) selectKernel(k *kernel.Kernel, agent, pipeline string) (*kernel.Kernel, error) {
	switch {
	case agent != "":
		if a.agents != nil {
			if ak, ok := a.agents.kernels[agent]; ok {
				return ak, nil
			}
		}
		return nil, usageError("--agent %s: no such agent; the agents are: %s (agents: in kernel.yaml; kernel agents lists them)", agent, a.agentNames())
	case pipeline != "":
		if a.agents != nil {
			if pk, ok := a.agents.pipelines[pipeline]; ok {
				return pk, nil
			}
		}
		return nil, usageError("--pipeline %s: no such pipeline; the pipelines are: %s (pipelines: in kernel.yaml; kernel agents lists them)", pipeline, a.pipelineNames())
	}
	return k, nil
}

// sessionKernel is the kernel that runs a session: the one of the agent
// or pipeline it records (SessionMeta.Agent), else k.
func (a *app) sessionKernel(k *kernel.Kernel, agent string) (*kernel.Kernel, error) {
	if agent == "" || agent == kernel.DefaultAgentName {
		return k, nil
	}
	if p, ok := strings.CutPrefix(agent, "pipeline:"); ok {
		return a.selectKernel(k, "", p)
	}
	if a.agents != nil {
		if ak, ok := a.agents.kernels[agent]; ok {
			return ak, nil
		}
	}
	return nil, fmt.Errorf("the session was run by agent %s, which the configuration does not have (the agents: %s): run it with the configuration that has it", agent, a.agentNames())
}

func (a *app) agentNames() string {
	if a.agents == nil || len(a.agents.cfg.Agents) == 0 {
		return "(none)"
	}
	var n []string
	for _, ag := range a.agents.cfg.Agents {
		n = append(n, ag.Name)
	}
	return strings.Join(n, ", ")
}

func (a *app) pipelineNames() string {
	if a.agents == nil || len(a.agents.cfg.Pipelines) == 0 {
		return "(none)"
	}
	var n []string
	for _, p := range a.agents.cfg.Pipelines {
		n = append(n, p.Name)
	}
	return strings.Join(n, ", ")
}

// runKernel is the kernel a CLI run of session sid uses: the one of the
// agent or pipeline the session records, or for a new session the one
// --agent or --pipeline names, else k.
func (a *app) runKernel(ctx context.Context, k *kernel.Kernel, cf *commonFlags, sid string) (*kernel.Kernel, error) {
	if sid == "" {
		return a.selectKernel(k, cf.agent, cf.pipeline)
	}
	sess, err := a.store.Load(ctx, sid)
	if err != nil {
		return k, nil // the run reports it with the usual words
	}
	return a.sessionKernel(k, sess.Meta.Agent)
}

// serveAgents are the named agents and pipelines kernel serve runs.
func (a *app) serveAgents() []serve.Agent {
	if a.agents == nil {
		return nil
	}
	var out []serve.Agent
	for _, ag := range a.agents.cfg.Agents {
		m := a.cfg.Model.Name
		if n := ag.ModelName(); n != "" {
			m = n
		}
		out = append(out, serve.Agent{Name: ag.Name, Kind: "agent", Description: ag.Description, Model: m, Kernel: a.agents.kernels[ag.Name]})
	}
	for _, p := range a.agents.cfg.Pipelines {
		out = append(out, serve.Agent{Name: agents.SessionAgent(p.Name), Kind: "pipeline", Description: p.Description, Model: "pipeline", Kernel: a.agents.pipelines[p.Name]})
	}
	return out
}
