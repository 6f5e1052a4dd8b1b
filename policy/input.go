package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
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
// docs/policy.md for the defaults. The session and run sections decode
// straight into a kernel.State (inputFields in env.go binds each of their
// keys to a State field), and derived env fields (session.tokens,
// run.tools, call.paths, call.argv, call.command) are computed from it
// exactly as they are in a running kernel: the input becomes a
// kernel.State (and a kernel.Call) and goes through the same code.
type Input struct {
	// Session and Run are where the sections were written; their fields
	// are in State.
	Session Section `yaml:"session"`
	Run     Section `yaml:"run"`
	// Turn is the deprecated name of Run, with round for turn and
	// max_rounds for max_turns; `kernel policy check` reports it.
	Turn Section `yaml:"turn"`
	// Tool overrides the spec of call.tool: its tier, source and tags
	// keys decode straight into Spec.
	Tool Section   `yaml:"tool"`
	Call CallInput `yaml:"call"`
	// Agent is the agent section: name, depth, parent and chain decode
	// into State.Agent (default: the top-level agent, depth 0).
	Agent Section `yaml:"agent"`
	// Context is the context window's use (context.used, .window,
	// .fraction; a fraction alone is enough).
	Context kernel.ContextUse `yaml:"context"`
	// Hooks are the lifecycle hook points' verdicts (hooks.before_model:
	// {blocked: true}, ...); they decode straight into State.Hooks.
	Hooks Section `yaml:"hooks"`
	// Tools are candidate tools for the surface (besides those named in a
	// test's offered and not_offered).
	Tools []string `yaml:"tools"`
	// Phase is before_model (default) or after_tools, for budgets.
	Phase string    `yaml:"phase"`
	Now   time.Time `yaml:"now"`
	// Memory is a retrieval for the memory: section to rule on: its
	// scope and hits (docs/policy.md, "Memory").
	Memory *MemoryRetrieval `yaml:"memory"`

	// State holds what the session and run sections set, before the
	// defaults (see state).
	State kernel.State `yaml:"-"`
	// Spec holds what the tool section sets; its zero fields leave the
	// tool's own spec alone.
	Spec kernel.ToolSpec `yaml:"-"`
	// SessionElapsed and RunElapsed are session.elapsed and run.elapsed:
	// State keeps times, and they become SessionCreated and RunStarted
	// once now is known.
	SessionElapsed, RunElapsed time.Duration `yaml:"-"`
}

// Section is a session, run or turn section of an Input: where it was
// written. Its fields go into Input.State.
type Section struct {
	At   pos
	node *yaml.Node
}

func (s *Section) decodeNode(_ *ydec, n *yaml.Node, _ string) { s.At, s.node = posOf(n), n }

// deprecatedInputFields maps the turn section's old keys to run's.
var deprecatedInputFields = map[string]string{"round": "turn", "max_rounds": "max_turns"}

// decodeNode decodes the input's own fields, then its sections into
// in.State through inputFields.
func (in *Input) decodeNode(d *ydec, n *yaml.Node, where string) {
	d.dec().DecodeStruct(n, reflect.ValueOf(in).Elem(), where)
	fields := inputFields(&in.State, &in.SessionElapsed, &in.RunElapsed)
	for _, sec := range []struct {
		name string
		s    *Section
		keys map[string]reflect.Value
	}{{"session", &in.Session, fields.session}, {"run", &in.Run, fields.run}, {"turn", &in.Turn, renamed(fields.run)}, {"agent", &in.Agent, fields.agent}, {"tool", &in.Tool, specFields(&in.Spec)},
		{"hooks", &in.Hooks, hookFields(&in.State.Hooks)}} {
		if sec.s.node == nil || isNull(sec.s.node) {
			continue
		}
		sub := sec.name
		if where != "" {
			sub = where + "." + sec.name
		}
		d.dec().DecodeFields(d.resolve(sec.s.node), sec.keys, sub)
	}
}

// renamed is run's fields under the deprecated turn section's keys.
func renamed(run map[string]reflect.Value) map[string]reflect.Value {
	out := make(map[string]reflect.Value, len(run))
	for k, v := range run {
		out[k] = v
	}
	for old, now := range deprecatedInputFields {
		out[old] = run[now]
		delete(out, now)
	}
	return out
}

// hookFields binds the hooks section's keys (the lifecycle points) to
// the verdicts they set.
func hookFields(v *kernel.HookVerdicts) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		out[rv.Type().Field(i).Tag.Get("yaml")] = rv.Field(i)
	}
	return out
}

// specFields binds the tool section's keys to the fields of spec they set.
func specFields(spec *kernel.ToolSpec) map[string]reflect.Value {
	return map[string]reflect.Value{
		"tier":   reflect.ValueOf(&spec.Tier).Elem(),
		"source": reflect.ValueOf(&spec.Source).Elem(),
		"tags":   reflect.ValueOf(&spec.Tags).Elem(),
	}
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
	callsAt := at
	if callsAt.Line == 0 {
		callsAt = in.Run.At
		if in.Turn.At.Line > 0 {
			callsAt = in.Turn.At
		}
	}
	for i, c := range in.State.RunCalls {
		if c.Outcome != "" && !c.Outcome.Valid() {
			ps.at(StageSyntax, callsAt, where, "input.run.calls[%d].outcome must be one of %s, got %q", i, kernel.OutcomeNames(), c.Outcome)
		}
	}
	switch in.Phase {
	case "", "before_model", "after_tools":
	default:
		ps.at(StageSyntax, at, where, "input.phase must be before_model or after_tools, got %q", in.Phase)
	}
	if in.Spec.Tier != "" && !in.Spec.Tier.Valid() {
		ps.at(StageSyntax, at, where, "input.tool.tier must be read_only, side_effecting or privileged, got %q", in.Spec.Tier)
	}
}

// state builds the kernel.State the input describes: in.State with the
// defaults of docs/policy.md, and its times from now and the elapsed
// times.
func (in *Input) state() *kernel.State {
	st := in.State
	now := in.Now
	if now.IsZero() {
		now = DefaultNow
	}
	st.Run, st.Turn = max(st.Run, 1), max(st.Turn, 1)
	if st.MaxTurns == 0 {
		st.MaxTurns = kernel.DefaultMaxTurns
	}
	st.SessionTotals.Turns = max(st.SessionTotals.Turns, st.Turn)
	st.SessionTotals.CostUSD = max(st.SessionTotals.CostUSD, st.RunTotals.CostUSD)
	st.RunTotals.Turns = st.Turn
	st.Now, st.SessionCreated, st.RunStarted = now, now.Add(-max(in.SessionElapsed, in.RunElapsed)), now.Add(-in.RunElapsed)
	st.Labels = maps.Clone(st.Labels)
	if st.Labels == nil {
		st.Labels = map[string]string{}
	}
	st.ToolCounts = maps.Clone(st.ToolCounts)
	if st.ToolCounts == nil {
		st.ToolCounts = map[string]int{}
	}
	st.RunCalls = slices.Clone(st.RunCalls)
	for i := range st.RunCalls {
		if st.RunCalls[i].Outcome == "" {
			st.RunCalls[i].Outcome = kernel.OutcomeOK
		}
	}
	if st.Agent.Name == "" {
		st.Agent.Name = kernel.DefaultAgentName
	}
	if len(st.Agent.Chain) == 0 {
		st.Agent.Chain = []string{st.Agent.Name}
		if st.Agent.Parent != "" {
			st.Agent.Chain = []string{st.Agent.Parent, st.Agent.Name}
		}
	}
	st.Context = in.Context
	if st.Context.Fraction == 0 && st.Context.Window > 0 {
		st.Context.Fraction = float64(st.Context.Used) / float64(st.Context.Window)
	}
	return &st
}

// phase is the budget phase of the input.
func (in *Input) phase() kernel.BudgetPhase {
	if in.Phase == "after_tools" {
		return kernel.AfterTools
	}
	return kernel.BeforeModel
}

// call builds the call the input describes, with the tool's spec found by
// specs and overridden by in.Spec.
func (in *Input) call(specs *specSet, st *kernel.State) (*kernel.Call, error) {
	spec := specs.get(in.Call.Tool)
	if in.Spec.Tier != "" {
		spec.Tier = in.Spec.Tier
	}
	if in.Spec.Source != "" {
		spec.Source = in.Spec.Source
	}
	if in.Spec.Tags != nil {
		spec.Tags = in.Spec.Tags
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
