package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
)

// DefaultNow is the time a test case or an explain input sees when it sets
// no now.
var DefaultNow = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// Input is a situation to decide on, as written in a test's input: or in
// the case file of `kernel policy explain`. Its sections are the env's
// (session, run, tool, call, context) and every field is optional; see
// docs/policy.md for the defaults. Derived env fields (session.tokens,
// run.tools, call.paths, call.argv, call.command) are computed from these
// exactly as they are in a running kernel: the input becomes a
// kernel.State (and a kernel.Call) and goes through the same code.
type Input struct {
	Session SessionInput `yaml:"session"`
	Run     RunInput     `yaml:"run"`
	// Turn is the deprecated name of Run, with round for turn and
	// max_rounds for max_turns; `kernel policy check` reports it.
	Turn TurnInput `yaml:"turn"`
	// Tool overrides the spec of call.tool (tier, source, tags).
	Tool ToolInput `yaml:"tool"`
	Call CallInput `yaml:"call"`
	// Context is the context window's use (context.used, .window,
	// .fraction; a fraction alone is enough).
	Context kernel.ContextUse `yaml:"context"`
	// Tools are candidate tools for the surface (besides those named in a
	// test's offered and not_offered).
	Tools []string `yaml:"tools"`
	// Phase is before_model (default) or after_tools, for budgets.
	Phase string    `yaml:"phase"`
	Now   time.Time `yaml:"now"`
}

// SessionInput sets the session fields of the env.
type SessionInput struct {
	ID        string            `yaml:"id"`
	Model     string            `yaml:"model"`
	Turns     int               `yaml:"turns"`
	TokensIn  int               `yaml:"tokens_in"`
	TokensOut int               `yaml:"tokens_out"`
	CostUSD   float64           `yaml:"cost_usd"`
	Elapsed   time.Duration     `yaml:"elapsed"`
	ToolCalls map[string]int    `yaml:"tool_calls"`
	Labels    map[string]string `yaml:"labels"`
}

// RunInput sets the run fields of the env.
type RunInput struct {
	At        pos                  `yaml:"-"`
	Number    int                  `yaml:"number"`
	Turn      int                  `yaml:"turn"`
	MaxTurns  int                  `yaml:"max_turns"`
	Prompt    string               `yaml:"prompt"`
	TokensIn  int                  `yaml:"tokens_in"`
	TokensOut int                  `yaml:"tokens_out"`
	CostUSD   float64              `yaml:"cost_usd"`
	Elapsed   time.Duration        `yaml:"elapsed"`
	Calls     []kernel.CallOutcome `yaml:"calls"`
}

// TurnInput is RunInput under its deprecated name turn, where round is
// turn and max_rounds is max_turns. It decodes into its RunInput (see
// decodeNode); At is set when the section was written.
type TurnInput struct {
	RunInput
}

// deprecatedInputFields maps the turn section's old keys to run's.
var deprecatedInputFields = map[string]string{"round": "turn", "max_rounds": "max_turns"}

// decodeNode decodes a turn: section as a run: section with the old keys
// renamed (a shallow copy of the mapping: the file's nodes are unchanged).
func (t *TurnInput) decodeNode(d *ydec, n *yaml.Node, where string) {
	if n.Kind == yaml.MappingNode {
		c := *n
		c.Content = slices.Clone(n.Content)
		for i := 0; i+1 < len(c.Content); i += 2 {
			if to, ok := deprecatedInputFields[c.Content[i].Value]; ok {
				k := *c.Content[i]
				k.Value = to
				c.Content[i] = &k
			}
		}
		n = &c
	}
	d.decode(n, reflect.ValueOf(&t.RunInput).Elem(), where)
}

// run is the run section, taken from the deprecated turn section when only
// that one is written.
func (in *Input) run() RunInput {
	if in.Turn.At.Line == 0 {
		return in.Run
	}
	return in.Turn.RunInput
}

// ToolInput overrides fields of a tool's spec.
type ToolInput struct {
	Tier   string   `yaml:"tier"`
	Source string   `yaml:"source"`
	Tags   []string `yaml:"tags"`
}

// CallInput is the call to decide on.
type CallInput struct {
	ID   string         `yaml:"id"`
	Tool string         `yaml:"tool"`
	Args map[string]any `yaml:"args"`
}

// ReadInput reads an Input from a YAML file (the case file of `kernel
// policy explain`). Unknown fields are errors with their line and column.
func ReadInput(path string) (Input, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Input{}, fmt.Errorf("read input: %w", err)
	}
	return ParseInput(path, b)
}

// ParseInput parses an Input; name is used in error messages.
func ParseInput(name string, src []byte) (Input, error) {
	ps := &problems{file: name, lines: splitLines(src)}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(src)).Decode(&root); err != nil {
		ps.add(StageSyntax, 0, 0, "", "%s", cleanYAMLErr(err))
		return Input{}, ps.err()
	}
	var in Input
	n := &root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	(&ydec{ps: ps}).decode(n, reflectValue(&in), "")
	in.check(ps, pos{}, "")
	if err := ps.err(); err != nil {
		return Input{}, err
	}
	return in, nil
}

func (in *Input) check(ps *problems, at pos, where string) {
	if in.Turn.At.Line > 0 && in.Run.At.Line > 0 {
		ps.at(StageSyntax, in.Turn.At, where, "input has both run and its deprecated name turn: write run only")
	}
	for i, c := range in.run().Calls {
		if c.Outcome != "" && !c.Outcome.Valid() {
			ps.at(StageSyntax, at, where, "input.run.calls[%d].outcome must be one of %s, got %q", i, kernel.OutcomeNames(), c.Outcome)
		}
	}
	switch in.Phase {
	case "", "before_model", "after_tools":
	default:
		ps.at(StageSyntax, at, where, "input.phase must be before_model or after_tools, got %q", in.Phase)
	}
	if in.Tool.Tier != "" && !kernel.Tier(in.Tool.Tier).Valid() {
		ps.at(StageSyntax, at, where, "input.tool.tier must be read_only, side_effecting or privileged, got %q", in.Tool.Tier)
	}
}

// state builds the kernel.State the input describes.
func (in *Input) state() *kernel.State {
	now := in.Now
	if now.IsZero() {
		now = DefaultNow
	}
	run := in.run()
	number, turn, maxTurns := max(run.Number, 1), max(run.Turn, 1), run.MaxTurns
	if maxTurns == 0 {
		maxTurns = kernel.DefaultMaxTurns
	}
	st := &kernel.State{
		SessionID: in.Session.ID, Model: in.Session.Model, Labels: in.Session.Labels, Prompt: run.Prompt,
		Run: number, Turn: turn, MaxTurns: maxTurns,
		SessionTotals: kernel.Totals{Turns: max(in.Session.Turns, turn),
			Usage:   kernel.Usage{InputTokens: int64(in.Session.TokensIn), OutputTokens: int64(in.Session.TokensOut)},
			CostUSD: max(in.Session.CostUSD, run.CostUSD)},
		RunTotals: kernel.Totals{Turns: turn,
			Usage:   kernel.Usage{InputTokens: int64(run.TokensIn), OutputTokens: int64(run.TokensOut)},
			CostUSD: run.CostUSD},
		Now: now, SessionCreated: now.Add(-max(in.Session.Elapsed, run.Elapsed)), RunStarted: now.Add(-run.Elapsed),
		ToolCounts: map[string]int{},
		Context:    in.Context,
	}
	if st.Labels == nil {
		st.Labels = map[string]string{}
	}
	if st.Context.Fraction == 0 && st.Context.Window > 0 {
		st.Context.Fraction = float64(st.Context.Used) / float64(st.Context.Window)
	}
	for k, v := range in.Session.ToolCalls {
		st.ToolCounts[k] = v
	}
	for _, c := range run.Calls {
		if c.Outcome == "" {
			c.Outcome = kernel.OutcomeOK
		}
		st.RunCalls = append(st.RunCalls, c)
	}
	return st
}

// phase is the budget phase of the input.
func (in *Input) phase() kernel.BudgetPhase {
	if in.Phase == "after_tools" {
		return kernel.AfterTools
	}
	return kernel.BeforeModel
}

// call builds the call the input describes, with the tool's spec found by
// specs and overridden by in.Tool.
func (in *Input) call(specs *specSet, st *kernel.State) (*kernel.Call, error) {
	spec := specs.get(in.Call.Tool)
	if in.Tool.Tier != "" {
		spec.Tier = kernel.Tier(in.Tool.Tier)
	}
	if in.Tool.Source != "" {
		spec.Source = in.Tool.Source
	}
	if in.Tool.Tags != nil {
		spec.Tags = in.Tool.Tags
	}
	args := in.Call.Args
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("input.call.args: %w", err)
	}
	id := in.Call.ID
	if id == "" {
		id = "call_1"
	}
	c, err := kernel.NewCall(id, spec, raw, st)
	if err != nil {
		return nil, fmt.Errorf("input.call.args: %w", err)
	}
	return c, nil
}

func splitLines(src []byte) []string {
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}
