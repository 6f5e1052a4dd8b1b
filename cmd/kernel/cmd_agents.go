package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/agents"
	"github.com/agentkernel/agentkernel/kernel"
)

var agentsGroup = group{
	name:   "agents",
	footer: "Agents and pipelines are agents: and pipelines: in kernel.yaml; run one with\nkernel run --agent NAME or --pipeline NAME. See docs/agents.md.",
	subs: []subcmd{
		{name: "ls", synopsis: "[--json]", summary: "list the configured agents (model, tools, budget) and pipelines\n(their steps), checked as a run checks them", flags: agentsLs},
		{name: "show", synopsis: "NAME [--json]", summary: "show one agent or pipeline in full: system prompt, tools, the\nagents it may call and those that may call it", args: "NAME", need: 1, needs: "an agent's or a pipeline's NAME", flags: agentsShow},
	},
}

// agentDoc is one agent in `kernel agents ls --json` and `show --json`.
type agentDoc struct {
	Name         string     `json:"name"`
	Description  string     `json:"description"`
	Model        string     `json:"model"`
	Tools        []string   `json:"tools"`
	CalledBy     []string   `json:"called_by,omitempty"`
	Policy       string     `json:"policy,omitempty"`
	Widen        bool       `json:"widen,omitempty"`
	Budget       *budgetDoc `json:"budget,omitempty"`
	MaxTurns     int        `json:"max_turns,omitempty"`
	SystemPrompt string     `json:"system_prompt,omitempty"`
}

// pipelineDoc is one pipeline in `kernel agents ls --json`.
type pipelineDoc struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Steps       [][]stepDoc `json:"stages"`
	Budget      *budgetDoc  `json:"budget,omitempty"`
}

type stepDoc struct {
	Name  string `json:"name"`
	Agent string `json:"agent"`
	Input string `json:"input"`
}

type agentsDoc struct {
	Agents    []agentDoc    `json:"agents"`
	Pipelines []pipelineDoc `json:"pipelines"`
}

// loadAgentsDoc loads the configuration (tools included: agents name
// them) and describes its agents and pipelines.
func loadAgentsDoc(ctx context.Context, cf *commonFlags, env *cliEnv) (agentsDoc, error) {
	doc := agentsDoc{Agents: []agentDoc{}, Pipelines: []pipelineDoc{}}
	a, err := loadApp(ctx, cf, env, false)
	if err != nil {
		return doc, err
	}
	defer a.Close()
	if a.agents == nil {
		return doc, nil
	}
	ac := a.agents.cfg
	for _, ag := range ac.Agents {
		d := agentDoc{Name: ag.Name, Description: ag.Description, Model: a.cfg.Model.Name, Policy: ag.Policy, Widen: ag.Widen,
			MaxTurns: ag.MaxTurns, SystemPrompt: ag.SystemPrompt, Tools: []string{}}
		if n := ag.ModelName(); n != "" {
			d.Model = n
		}
		for _, t := range ag.Tools {
			d.Tools = append(d.Tools, t.Name)
		}
		d.Budget = budgetJSON(ag.Budget)
		for _, c := range ac.Agents {
			for _, r := range c.Agents() {
				if r.Name == ag.Name {
					d.CalledBy = append(d.CalledBy, c.Name)
				}
			}
		}
		for _, p := range ac.Pipelines {
			for _, st := range p.Steps() {
				if st.Agent == ag.Name {
					d.CalledBy = append(d.CalledBy, agents.SessionAgent(p.Name))
					break
				}
			}
		}
		doc.Agents = append(doc.Agents, d)
	}
	for _, p := range ac.Pipelines {
		d := pipelineDoc{Name: p.Name, Description: p.Description}
		d.Budget = budgetJSON(p.Budget)
		for _, stage := range p.Stages {
			var s []stepDoc
			for _, st := range stage {
				in := ""
				if st.Input != nil {
					in = st.Input.String()
				}
				s = append(s, stepDoc{Name: st.Name, Agent: st.Agent, Input: in})
			}
			d.Steps = append(d.Steps, s)
		}
		doc.Pipelines = append(doc.Pipelines, d)
	}
	return doc, nil
}

func agentsLs(fs *flag.FlagSet) subRun {
	asJSON := fs.Bool("json", false, "print JSON")
	names := fs.String("names", "", "print only the names of the `agents` or the pipelines, one a line\n(what shell completion of --agent and --pipeline offers)")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
		if *names != "" && *names != "agents" && *names != "pipelines" {
			return usageError("--names %s: want agents or pipelines", *names)
		}
		doc, err := loadAgentsDoc(ctx, cf, env)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(env, doc)
		}
		switch *names {
		case "agents":
			for _, d := range doc.Agents {
				fmt.Fprintln(env.stdout, d.Name)
			}
			return nil
		case "pipelines":
			for _, d := range doc.Pipelines {
				fmt.Fprintln(env.stdout, d.Name)
			}
			return nil
		}
		if len(doc.Agents) == 0 && len(doc.Pipelines) == 0 {
			fmt.Fprintln(env.stderr, "no agents or pipelines (agents: and pipelines: in kernel.yaml; see docs/agents.md)")
			return nil
		}
		if len(doc.Agents) > 0 {
			rows := [][]string{{"AGENT", "MODEL", "TOOLS", "BUDGET", "DESCRIPTION"}}
			for _, d := range doc.Agents {
				rows = append(rows, []string{d.Name, d.Model, strings.Join(d.Tools, ","), budgetText(d.Budget), clip(firstLine(d.Description), 50)})
			}
			if _, err := writeTable(env.stdout, rows, terminalWidth(env.stdout), 2, 4); err != nil {
				return err
			}
		}
		if len(doc.Pipelines) > 0 {
			if len(doc.Agents) > 0 {
				fmt.Fprintln(env.stdout)
			}
			rows := [][]string{{"PIPELINE", "STEPS", "BUDGET", "DESCRIPTION"}}
			for _, d := range doc.Pipelines {
				rows = append(rows, []string{d.Name, stagesText(d.Steps), budgetText(d.Budget), clip(firstLine(d.Description), 50)})
			}
			if _, err := writeTable(env.stdout, rows, terminalWidth(env.stdout), 1, 3); err != nil {
				return err
			}
		}
		fmt.Fprintf(env.stderr, "%d agents, %d pipelines · `kernel agents show NAME` shows one in full\n", len(doc.Agents), len(doc.Pipelines))
		return nil
	}
}

func agentsShow(fs *flag.FlagSet) subRun {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		doc, err := loadAgentsDoc(ctx, cf, env)
		if err != nil {
			return err
		}
		name := pos[0]
		for _, d := range doc.Agents {
			if d.Name != name {
				continue
			}
			if *asJSON {
				return writeJSON(env, d)
			}
			w := env.stdout
			fmt.Fprintf(w, "agent %s\n  %s\n\n", d.Name, d.Description)
			fmt.Fprintf(w, "model:      %s\n", d.Model)
			fmt.Fprintf(w, "tools:      %s\n", orNone(strings.Join(d.Tools, ", ")))
			fmt.Fprintf(w, "called by:  %s\n", orNone(strings.Join(d.CalledBy, ", ")))
			fmt.Fprintf(w, "policy:     %s\n", orDefault(d.Policy, "the configuration's (policy.file)"))
			fmt.Fprintf(w, "budget:     %s\n", budgetText(d.Budget))
			if d.MaxTurns > 0 {
				fmt.Fprintf(w, "max turns:  %d\n", d.MaxTurns)
			}
			if d.SystemPrompt != "" {
				fmt.Fprintf(w, "\nsystem prompt:\n%s\n", d.SystemPrompt)
			}
			return nil
		}
		for _, d := range doc.Pipelines {
			if d.Name != name {
				continue
			}
			if *asJSON {
				return writeJSON(env, d)
			}
			w := env.stdout
			fmt.Fprintf(w, "pipeline %s\n", d.Name)
			if d.Description != "" {
				fmt.Fprintf(w, "  %s\n", d.Description)
			}
			fmt.Fprintf(w, "budget: %s\n\n", budgetText(d.Budget))
			for i, stage := range d.Steps {
				for _, st := range stage {
					mark := fmt.Sprintf("%d.", i+1)
					if len(stage) > 1 {
						mark += " ∥"
					}
					fmt.Fprintf(w, "%s %s (agent %s)\n   %s\n", mark, st.Name, st.Agent, strings.ReplaceAll(strings.TrimSpace(st.Input), "\n", "\n   "))
				}
			}
			return nil
		}
		var names []string
		for _, d := range doc.Agents {
			names = append(names, d.Name)
		}
		for _, d := range doc.Pipelines {
			names = append(names, d.Name)
		}
		return fmt.Errorf("no agent or pipeline %q; the configuration has: %s (kernel agents ls)", name, orNone(strings.Join(names, ", ")))
	}
}

// budgetDoc is a budget in --json: its time as a duration string.
type budgetDoc struct {
	CostUSD float64 `json:"cost_usd,omitempty"`
	Tokens  int64   `json:"tokens,omitempty"`
	Time    string  `json:"time,omitempty"`
}

func budgetJSON(b kernel.Budget) *budgetDoc {
	if b.IsZero() {
		return nil
	}
	d := &budgetDoc{CostUSD: b.CostUSD, Tokens: b.Tokens}
	if b.Time > 0 {
		d.Time = b.Time.String()
	}
	return d
}

func budgetText(b *budgetDoc) string {
	if b == nil {
		return "-"
	}
	var parts []string
	if b.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4g", b.CostUSD))
	}
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.Tokens))
	}
	if b.Time != "" {
		parts = append(parts, b.Time)
	}
	return strings.Join(parts, ", ")
}

func stagesText(stages [][]stepDoc) string {
	var out []string
	for _, stage := range stages {
		var s []string
		for _, st := range stage {
			s = append(s, st.Name)
		}
		if len(s) > 1 {
			out = append(out, "("+strings.Join(s, " ∥ ")+")")
		} else {
			out = append(out, s[0])
		}
	}
	return strings.Join(out, " → ")
}

func orNone(s string) string { return orDefault(s, "(none)") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
