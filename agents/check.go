package agents

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/kernel"
)

// Env is what Check holds the configuration to.
type Env struct {
	// Tools are the names of the registered tools (every source but
	// agents).
	Tools []string
	// Provider is model.provider, which an agent's model inherits unless
	// its model section sets one.
	Provider string
	// KnownModel reports whether a model name is one the configuration
	// knows (the catalog, model.prices, model.overrides, model.fallbacks,
	// model.name); nil knows every name.
	KnownModel func(name string) bool
	// MaxDepth is limits.max_agent_depth (0: kernel.DefaultMaxDepth).
	MaxDepth int
	// MemoryScope is memory.scope when memory is enabled (session when
	// unset), empty when it is not: an agent's memory: is checked
	// against it.
	MemoryScope string
}

// memoryWidth orders memory scopes by what they see; 0 is not a scope.
func memoryWidth(s string) int {
	switch s {
	case "session":
		return 1
	case "workspace":
		return 2
	case "owner":
		return 3
	}
	return 0
}

// Check refuses what would fail or misbehave at run time, each problem
// with its file, line and column and what to do: an agent naming an
// unknown tool, model or agent; agents calling each other in a cycle; an
// agent whose tools go beyond a caller's; a chain deeper than the depth
// limit; a pipeline step naming an unknown agent or reading an output no
// earlier step writes. All problems are returned, joined.
func (c *Config) Check(env Env) error {
	var errs []error
	add := func(e *config.Error) { errs = append(errs, e) }
	tools := map[string]bool{}
	for _, t := range env.Tools {
		tools[t] = true
		if strings.HasPrefix(t, kernel.AgentToolPrefix) {
			add(&config.Error{File: c.File, Field: "tools", Err: fmt.Errorf("the registered tool %s has a name agent tools use (agent.<name>): rename its source (an MCP server or a plugin named agent)", t)})
		}
	}
	names := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		names[i] = a.Name
	}
	for _, a := range c.Agents {
		at := func(p Pos, field, format string, args ...any) {
			add(&config.Error{File: c.File, Line: p.Line, Column: p.Col, Kind: "agent", Name: a.Name, Field: field, Err: fmt.Errorf(format, args...)})
		}
		if a.Name == kernel.DefaultAgentName {
			at(a.At, "", "%q is the name of the configuration's top-level agent: choose another name", a.Name)
		}
		switch {
		case a.Memory == "" || a.Memory == "off":
		case env.MemoryScope == "":
			at(a.MemoryAt, "memory", "memory is not enabled: set memory.enabled: true, or remove the agent's memory: %s", a.Memory)
		case memoryWidth(a.Memory) == 0:
			at(a.MemoryAt, "memory", "unknown memory scope %q: want session, workspace, owner or off", a.Memory)
		case memoryWidth(a.Memory) > memoryWidth(env.MemoryScope):
			at(a.MemoryAt, "memory", "memory scope %s is wider than memory.scope (%s): an agent sees no more than the configuration allows; narrow it, or widen memory.scope", a.Memory, env.MemoryScope)
		}
		if a.Widen && a.Policy == "" {
			at(a.WidenAt, "widen", "an agent given tools its callers do not have needs a policy of its own: set policy: FILE, or remove widen")
		}
		for i, t := range a.Tools {
			field := fmt.Sprintf("tools[%d]", i)
			if n, ok := strings.CutPrefix(t.Name, kernel.AgentToolPrefix); ok {
				switch {
				case c.Agent(n) == nil:
					at(t.At, field, "unknown agent %q%s; the agents are: %s", n, suggest(n, names), list(names))
				case n == a.Name:
					at(t.At, field, "agent %s calls itself: remove %s from its tools (agents may not call each other in a cycle)", a.Name, t.Name)
				}
				continue
			}
			if !tools[t.Name] {
				at(t.At, field, "unknown tool %q%s; the registered tools are: %s (an agent is named agent.<name>)", t.Name, suggest(t.Name, env.Tools), list(env.Tools))
			}
		}
		if a.Model != nil {
			name, provider := modelOf(a)
			if provider == "" {
				provider = env.Provider
			}
			if provider != "scripted" && name != "" && env.KnownModel != nil && !env.KnownModel(name) {
				at(a.ModelAt, "model", "unknown model %q: name a model of the catalog (kernel/catalog/models.yaml, model.catalog), or declare it under model.prices or model.overrides", name)
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, c.checkGraph(env)...)
	}
	errs = append(errs, c.checkPipelines()...)
	return errors.Join(errs...)
}

// ModelName is the model name the agent's model: sets, or "" (the
// configuration's).
func (a *Agent) ModelName() string {
	if a.Model == nil {
		return ""
	}
	n, _ := modelOf(a)
	return n
}

// modelOf returns the model name and provider an agent's model: sets.
func modelOf(a *Agent) (name, provider string) {
	if a.Model.Value != "" && len(a.Model.Content) == 0 {
		return a.Model.Value, ""
	}
	if v := mapValue(a.Model, "name"); v != nil {
		name = v.Value
	}
	if v := mapValue(a.Model, "provider"); v != nil {
		provider = v.Value
	}
	return name, provider
}

// checkGraph refuses cycles, surfaces wider than a caller's, and chains
// deeper than the limit.
func (c *Config) checkGraph(env Env) []error {
	var errs []error
	// Cycles: a depth-first walk; the edge that closes a cycle is named.
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(a *Agent)
	visit = func(a *Agent) {
		state[a.Name] = onPath
		path = append(path, a.Name)
		for _, r := range a.Agents() {
			b := c.Agent(r.Name)
			switch state[b.Name] {
			case onPath:
				i := slices.Index(path, b.Name)
				cycle := append(slices.Clone(path[i:]), b.Name)
				errs = append(errs, &config.Error{File: c.File, Line: r.At.Line, Column: r.At.Col, Kind: "agent", Name: a.Name, Field: "tools",
					Err: fmt.Errorf("agents call each other in a cycle: %s; remove agent.%s from %s's tools", strings.Join(cycle, " → "), b.Name, a.Name)})
			case unseen:
				visit(b)
			}
		}
		path = path[:len(path)-1]
		state[a.Name] = done
	}
	for _, a := range c.Agents {
		if state[a.Name] == unseen {
			visit(a)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// Surfaces: a callee's tools are a subset of each caller's.
	for _, caller := range c.Agents {
		own := map[string]bool{}
		for _, t := range caller.Tools {
			own[t.Name] = true
		}
		for _, r := range caller.Agents() {
			callee := c.Agent(r.Name)
			if callee.Widen {
				continue
			}
			for i, t := range callee.Tools {
				if strings.HasPrefix(t.Name, kernel.AgentToolPrefix) || own[t.Name] {
					continue
				}
				errs = append(errs, &config.Error{File: c.File, Line: t.At.Line, Column: t.At.Col, Kind: "agent", Name: callee.Name, Field: fmt.Sprintf("tools[%d]", i),
					Err: fmt.Errorf("agent %s may call %s, which its caller %s may not (a child's surface is never wider than its caller's): remove it here, add it to agents.%s.tools, or set widen: true with a policy: of %s's own",
						callee.Name, t.Name, caller.Name, caller.Name, callee.Name)})
			}
		}
	}
	// Depth: the longest chain from a top-level run (a pipeline adds one).
	max := env.MaxDepth
	if max <= 0 {
		max = kernel.DefaultMaxDepth
	}
	var longest func(a *Agent) []string
	longest = func(a *Agent) []string {
		var best []string
		for _, r := range a.Agents() {
			if l := longest(c.Agent(r.Name)); len(l) > len(best) {
				best = l
			}
		}
		return append([]string{a.Name}, best...)
	}
	for _, a := range c.Agents {
		if chain := longest(a); len(chain)-1 > max {
			errs = append(errs, &config.Error{File: c.File, Line: a.At.Line, Column: a.At.Col, Kind: "agent", Name: a.Name,
				Err: fmt.Errorf("the chain %s is %d calls deep; limits.max_agent_depth is %d: raise it, or shorten the chain", strings.Join(chain, " → "), len(chain)-1, max)})
			break
		}
	}
	for _, p := range c.Pipelines {
		for _, st := range p.Steps() {
			if a := c.Agent(st.Agent); a != nil {
				if chain := longest(a); len(chain) > max {
					errs = append(errs, &config.Error{File: c.PipelinesFile, Line: st.AgentAt.Line, Column: st.AgentAt.Col, Kind: "pipeline", Name: p.Name,
						Err: fmt.Errorf("step %s's chain %s is %d calls deep below the pipeline; limits.max_agent_depth is %d: raise it, or shorten the chain", st.Name, strings.Join(chain, " → "), len(chain), max)})
				}
			}
		}
	}
	return errs
}

// checkPipelines refuses unknown agents, duplicate step names and
// templates that read outputs no earlier step writes.
func (c *Config) checkPipelines() []error {
	var errs []error
	agents := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		agents[i] = a.Name
	}
	for _, p := range c.Pipelines {
		at := func(pos Pos, field, format string, args ...any) {
			errs = append(errs, &config.Error{File: c.PipelinesFile, Line: pos.Line, Column: pos.Col, Kind: "pipeline", Name: p.Name, Field: field, Err: fmt.Errorf(format, args...)})
		}
		var earlier []string
		seen := map[string]bool{}
		for i, stage := range p.Stages {
			var here []string
			for j, st := range stage {
				field := fmt.Sprintf("steps[%d]", i)
				if len(stage) > 1 {
					field += fmt.Sprintf(".parallel[%d]", j)
				}
				if seen[st.Name] {
					at(st.At, field+".name", "two steps are named %s: step names are how inputs refer to outputs ({{steps.NAME.output}}), so each is used once", st.Name)
				}
				seen[st.Name] = true
				here = append(here, st.Name)
				if c.Agent(st.Agent) == nil {
					at(st.AgentAt, field+".agent", "unknown agent %q%s; the agents are: %s", st.Agent, suggest(st.Agent, agents), list(agents))
				}
				if st.Input == nil {
					continue
				}
				for _, ref := range st.Input.Steps() {
					if slices.Contains(earlier, ref) {
						continue
					}
					why := "no earlier step writes it"
					if slices.ContainsFunc(stage, func(s Step) bool { return s.Name == ref }) {
						why = "it runs at the same time, in the same parallel group"
					} else if seen[ref] || p.hasStep(ref) {
						why = "that step runs later"
					}
					at(st.InputAt, field+".input", "reads {{steps.%s.output}}, but %s (the steps before it: %s)", ref, why, list(earlier))
				}
			}
			earlier = append(earlier, here...)
		}
		if p.Output != nil {
			for _, ref := range p.Output.Steps() {
				if !slices.Contains(earlier, ref) {
					at(p.OutputAt, "output", "reads {{steps.%s.output}}, but no step is named %s (the steps: %s)", ref, ref, list(earlier))
				}
			}
		}
	}
	return errs
}

func (p *Pipeline) hasStep(name string) bool {
	return slices.ContainsFunc(p.Steps(), func(s Step) bool { return s.Name == name })
}

// list renders names for a message.
func list(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// suggest returns ` (did you mean "x"?)` for the name of names closest to
// s, when one is within two edits, else "".
func suggest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := distance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
