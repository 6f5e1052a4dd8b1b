// Package agents reads the agents: and pipelines: sections of
// kernel.yaml, checks them before anything runs, and plays a pipeline as
// the model of its session.
//
// An agent is configuration: a name, a description, a model (or the
// configuration's), a system prompt, the tools it may call (a subset of the
// registered tools, and other agents as agent.<name>), its own policy
// file or the shared one, a budget and a turn cap. cmd/kernel builds a
// kernel.Kernel for each and registers each as the tool agent.<name> in
// the registries of the agents that name it (kernel.AgentTool): the call
// runs the agent in a child session (package kernel, "Delegation").
//
// A pipeline is a fixed plan of agent calls: sequential steps, and
// parallel groups that run together and are joined by the next step. Its
// session's "model" is the Pipeline provider: each generation is the next
// step's calls, their inputs templated from the run's input and the
// earlier steps' outputs ({{input}}, {{steps.NAME.output}}), so the loop
// runs, stores, resumes and accounts for a pipeline as for any run.
//
// Check refuses, with the file, line and the fix, an agent naming an
// unknown tool, model or agent; agents calling each other in a cycle; an
// agent given tools its caller does not have; and a pipeline step reading
// an output that no earlier step writes.
package agents

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/kernel"
)

// Pos is a place in the configuration file.
type Pos = config.Pos

// Config is the agents: and pipelines: sections.
type Config struct {
	// File is the configuration file that sets agents: (errors name it);
	// PipelinesFile the one that sets pipelines:.
	File, PipelinesFile string
	Agents              []*Agent
	Pipelines           []*Pipeline
}

// Agent is one entry of agents:.
type Agent struct {
	Name        string
	Description string
	// Model is the model: a name (Scalar) or a section laid over model:
	// (a mapping node); nil for the configuration's model.
	Model *yaml.Node
	// SystemPrompt is system_prompt, or system_prompt_file's path in
	// SystemPromptFile (read by cmd/kernel).
	SystemPrompt     string
	SystemPromptFile string
	Tools            []Ref
	// Widen lets the agent have tools its callers do not: only with a
	// policy file of its own (Policy).
	Widen  bool
	Policy string
	Budget kernel.Budget
	// MaxTurns is the agent's turn cap (0: limits.max_turns); Timeout
	// bounds one call of the agent (0: kernel.DefaultAgentTimeout).
	MaxTurns int
	Timeout  time.Duration
	// Memory is the agent's memory scope (memory:): session, workspace or
	// owner, never wider than memory.scope, or off (nothing injected,
	// memory_search refused); empty for memory.scope.
	Memory string

	At, ModelAt, PolicyAt, WidenAt, MemoryAt Pos
}

// Ref is a name written in the file, where it was written.
type Ref struct {
	Name string
	At   Pos
}

// Agents returns the names of the agents a's tools name (agent.<name>),
// in order.
func (a *Agent) Agents() []Ref {
	var out []Ref
	for _, t := range a.Tools {
		if n, ok := strings.CutPrefix(t.Name, kernel.AgentToolPrefix); ok {
			out = append(out, Ref{n, t.At})
		}
	}
	return out
}

// Pipeline is one entry of pipelines:.
type Pipeline struct {
	Name        string
	Description string
	Budget      kernel.Budget
	// Stages run in order; the steps of one stage run together (a
	// parallel group has two or more).
	Stages [][]Step
	// Output is the pipeline's answer (default: the last stage's outputs).
	Output   *Template
	At       Pos
	OutputAt Pos
}

// Step is one agent call of a pipeline.
type Step struct {
	Name    string
	Agent   string
	Input   *Template
	At      Pos
	AgentAt Pos
	InputAt Pos
}

// Steps returns every step in order.
func (p *Pipeline) Steps() []Step {
	var out []Step
	for _, st := range p.Stages {
		out = append(out, st...)
	}
	return out
}

// Agent returns the agent named name, or nil.
func (c *Config) Agent(name string) *Agent {
	for _, a := range c.Agents {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Pipeline returns the pipeline named name, or nil.
func (c *Config) Pipeline(name string) *Pipeline {
	for _, p := range c.Pipelines {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Decode reads the agents: section (the mapping node agents, nil for
// none) of file, and the pipelines: section of pipelinesFile. The
// document was validated against schemas/config.schema.json: Decode
// trusts its shape, and reports what the schema cannot say (a template
// that does not parse) with its place.
func Decode(file string, agents *yaml.Node, pipelinesFile string, pipelines *yaml.Node) (*Config, error) {
	c := &Config{File: file, PipelinesFile: pipelinesFile}
	if agents != nil && agents.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(agents.Content); i += 2 {
			a, err := decodeAgent(file, agents.Content[i], agents.Content[i+1])
			if err != nil {
				return nil, err
			}
			c.Agents = append(c.Agents, a)
		}
	}
	if pipelines != nil && pipelines.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(pipelines.Content); i += 2 {
			p, err := decodePipeline(pipelinesFile, pipelines.Content[i], pipelines.Content[i+1])
			if err != nil {
				return nil, err
			}
			c.Pipelines = append(c.Pipelines, p)
		}
	}
	return c, nil
}

// fields calls fn for each key of mapping n.
func fields(n *yaml.Node, fn func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if err := fn(n.Content[i].Value, n.Content[i], n.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func errAt(file string, n *yaml.Node, kind, name, field, format string, a ...any) *config.Error {
	return &config.Error{File: file, Line: n.Line, Column: n.Column, Kind: kind, Name: name, Field: field, Err: fmt.Errorf(format, a...)}
}

func decodeAgent(file string, key, n *yaml.Node) (*Agent, error) {
	a := &Agent{Name: key.Value, At: config.PosOf(key)}
	err := fields(n, func(f string, k, v *yaml.Node) error {
		switch f {
		case "description":
			a.Description = v.Value
		case "model":
			a.Model, a.ModelAt = v, config.PosOf(v)
		case "system_prompt":
			a.SystemPrompt = v.Value
		case "system_prompt_file":
			a.SystemPromptFile = v.Value
		case "tools":
			for _, t := range v.Content {
				a.Tools = append(a.Tools, Ref{t.Value, config.PosOf(t)})
			}
		case "widen":
			a.Widen, a.WidenAt = v.Value == "true", config.PosOf(v)
		case "policy":
			a.Policy, a.PolicyAt = v.Value, config.PosOf(v)
		case "budget":
			b, err := decodeBudget(file, "agent", a.Name, v)
			if err != nil {
				return err
			}
			a.Budget = b
		case "max_turns":
			if err := v.Decode(&a.MaxTurns); err != nil {
				return errAt(file, v, "agent", a.Name, "max_turns", "%v", err)
			}
		case "memory":
			a.Memory, a.MemoryAt = v.Value, config.PosOf(v)
		case "timeout":
			d, err := config.ParseDuration(v.Value)
			if err != nil {
				return errAt(file, v, "agent", a.Name, "timeout", "%v", err)
			}
			a.Timeout = d
		}
		return nil
	})
	return a, err
}

func decodeBudget(file, kind, name string, n *yaml.Node) (kernel.Budget, error) {
	var b kernel.Budget
	err := fields(n, func(f string, k, v *yaml.Node) error {
		var err error
		switch f {
		case "cost_usd":
			err = v.Decode(&b.CostUSD)
		case "tokens":
			err = v.Decode(&b.Tokens)
		case "time":
			b.Time, err = config.ParseDuration(v.Value)
		}
		if err != nil {
			return errAt(file, v, kind, name, "budget."+f, "%v", err)
		}
		return nil
	})
	return b, err
}

func decodePipeline(file string, key, n *yaml.Node) (*Pipeline, error) {
	p := &Pipeline{Name: key.Value, At: config.PosOf(key)}
	err := fields(n, func(f string, k, v *yaml.Node) error {
		switch f {
		case "description":
			p.Description = v.Value
		case "budget":
			b, err := decodeBudget(file, "pipeline", p.Name, v)
			if err != nil {
				return err
			}
			p.Budget = b
		case "output":
			t, err := ParseTemplate(v.Value)
			if err != nil {
				return errAt(file, v, "pipeline", p.Name, "output", "%v", err)
			}
			p.Output, p.OutputAt = t, config.PosOf(v)
		case "steps":
			for i, item := range v.Content {
				var stage []Step
				if par := mapValue(item, "parallel"); par != nil {
					for j, s := range par.Content {
						st, err := decodeStep(file, p.Name, fmt.Sprintf("steps[%d].parallel[%d]", i, j), s)
						if err != nil {
							return err
						}
						stage = append(stage, st)
					}
				} else {
					st, err := decodeStep(file, p.Name, fmt.Sprintf("steps[%d]", i), item)
					if err != nil {
						return err
					}
					stage = append(stage, st)
				}
				p.Stages = append(p.Stages, stage)
			}
		}
		return nil
	})
	return p, err
}

func decodeStep(file, pipeline, where string, n *yaml.Node) (Step, error) {
	st := Step{At: config.PosOf(n)}
	err := fields(n, func(f string, k, v *yaml.Node) error {
		switch f {
		case "name":
			st.Name = v.Value
		case "agent":
			st.Agent, st.AgentAt = v.Value, config.PosOf(v)
		case "input":
			t, err := ParseTemplate(v.Value)
			if err != nil {
				return errAt(file, v, "pipeline", pipeline, where+".input", "%v", err)
			}
			st.Input, st.InputAt = t, config.PosOf(v)
		}
		return nil
	})
	return st, err
}

// mapValue returns the value of key in mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
