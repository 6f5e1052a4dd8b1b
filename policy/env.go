package policy

import (
	"path"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// Env is the environment every policy expression is evaluated in. Its keys
// are closed: a misspelt field such as tool.nmae is a compile error with its
// line and column, never a silent nil. Only Call.Args is an open map; the
// two typed maps (Session.ToolCalls, Session.Labels) are keyed by data
// (tool and label names), a missing key reads as 0 or "", and literal tool
// names used as keys are checked against the registered tools.
//
// Two more names are resolved when a file is compiled rather than at
// evaluation: v.<name> (the file's vars) and budget.<name> (the file's
// budget constants). See docs/policy.md for every field.
// Why a struct and not a map: RATIONALE.md, "Closed-key environment, vars
// inlined".
type Env struct {
	Session SessionEnv `expr:"session"`
	Run     RunEnv     `expr:"run"`
	// Turn is the deprecated name of Run (see TurnEnv).
	Turn TurnEnv `expr:"turn"`
	Tool ToolEnv `expr:"tool"`
	Call CallEnv `expr:"call"`
	// Context is the next request's share of the model's context window.
	Context ContextEnv `expr:"context"`
	// Agent is the agent the session runs, its depth and who called it
	// (docs/agents.md).
	Agent AgentEnv `expr:"agent"`
	// Hooks are the verdicts of the lifecycle hook points so far: in this
	// turn (before_compact, before_model, after_model) and this run
	// (run_start, run_end): hooks.before_model.blocked,
	// hooks.after_model.refused, ... (docs/hooks.md).
	Hooks kernel.HookVerdicts `expr:"hooks"`
	// Memory is the retrieval memory is about to inject, in memory: rules
	// (the zero value elsewhere); Hit the hit a drop rule decides on
	// (docs/memory.md, "Policy").
	Memory MemoryEnv `expr:"memory"`
	Hit    MemoryHit `expr:"hit"`
	// Chunk is the chunk an exclude rule decides on indexing (the zero
	// value elsewhere); call is then the call a tool result answers.
	Chunk MemoryChunk `expr:"chunk"`
	// Now is the time of the decision (the kernel's clock; the test case's
	// now in tests), so time-based rules are deterministic under test.
	Now time.Time `expr:"now"`

	// paths is the storage Call.Paths is built in, kept across the pool's
	// uses of this Env (unexported: expr and the fast path never see it).
	// Nothing outside the Env keeps Call.Paths: rules read it while the
	// Env is borrowed; putEnvSections clears what it held.
	paths []string
	// keptCalls and keptTools are the storage of run.calls and run.tools,
	// kept across pool uses (fillCalls).
	keptCalls []CallOutcome
	keptTools []string
}

// SessionEnv is the whole session: every run so far.
type SessionEnv struct {
	ID    string `expr:"id"`
	Model string `expr:"model"`
	// Runs counts the session's runs (user prompts), the current one
	// included; Turns its turns (model generations), the current one
	// included.
	Runs  int `expr:"runs"`
	Turns int `expr:"turns"`
	// TokensIn, TokensOut and Tokens (their sum) are the session's token
	// totals; CostUSD its cost.
	TokensIn  int     `expr:"tokens_in"`
	TokensOut int     `expr:"tokens_out"`
	Tokens    int     `expr:"tokens"`
	CostUSD   float64 `expr:"cost_usd"`
	// Elapsed is the time since the session was created.
	Elapsed time.Duration `expr:"elapsed"`
	// ToolCalls counts the session's finished tool calls by tool name.
	ToolCalls map[string]int    `expr:"tool_calls"`
	Labels    map[string]string `expr:"labels"`
}

// RunEnv is the current run: one user prompt and the turns (model
// generations) that answer it. A run an approval interrupted continues
// when the approval is resolved, with its number and turn count.
type RunEnv struct {
	// Number is the run's number in the session, from 1.
	Number int `expr:"number"`
	// Turn is the current turn of this run, from 1; MaxTurns the kernel's
	// hard cap on the turns of a run (limits.max_turns).
	Turn     int `expr:"turn"`
	MaxTurns int `expr:"max_turns"`
	// Prompt is the latest user text.
	Prompt    string        `expr:"prompt"`
	TokensIn  int           `expr:"tokens_in"`
	TokensOut int           `expr:"tokens_out"`
	Tokens    int           `expr:"tokens"`
	CostUSD   float64       `expr:"cost_usd"`
	Elapsed   time.Duration `expr:"elapsed"`
	// Tools names the tools called this run, in order, one entry per call.
	Tools []string `expr:"tools"`
	// Calls are this run's finished calls with their outcomes.
	Calls []CallOutcome `expr:"calls"`
	// Corrections counts the text tool protocol's corrections sent this
	// run (docs/providers.md).
	Corrections int `expr:"corrections"`
	// Phase is "before_model" or "after_tools" in budget expressions and
	// "" everywhere else.
	Phase string `expr:"phase"`
}

// TurnEnv is RunEnv under its deprecated name turn, accepted for one
// release and reported by `kernel policy check`: turn.number is
// run.number, turn.round is run.turn, turn.max_rounds is run.max_turns,
// and every other turn.<field> is run.<field> (read through the embedded
// pointer to Env.Run, so a field added to RunEnv needs nothing here).
type TurnEnv struct {
	*RunEnv
	Round     int `expr:"round"`
	MaxRounds int `expr:"max_rounds"`
}

// deprecatedRunFields maps each turn.<field> to its run.<field>.
var deprecatedRunFields = map[string]string{"round": "turn", "max_rounds": "max_turns"}

// CallOutcome is a finished call of the run.
type CallOutcome struct {
	Tool string `expr:"tool" json:"tool"`
	// Outcome is one of ok, error, denied, blocked, cancelled, deferred,
	// awaiting_approval, rejected.
	Outcome string `expr:"outcome" json:"outcome"`
}

// ContextEnv is the context window as the next request uses it: Used
// tokens of Window (0 when the window is unknown), Fraction their ratio.
type ContextEnv struct {
	Used     int     `expr:"used"`
	Window   int     `expr:"window"`
	Fraction float64 `expr:"fraction"`
}

// AgentEnv is the agent a session runs: its name (default for the
// configuration's top-level agent), its depth (0 for a top-level run, 1
// for a run an agent's call started), the calling agent's name (empty at
// depth 0) and the chain of agents from the top-level run down to it.
type AgentEnv struct {
	Name   string   `expr:"name"`
	Depth  int      `expr:"depth"`
	Parent string   `expr:"parent"`
	Chain  []string `expr:"chain"`
}

// ToolEnv is the tool being decided on (a rule, a drop rule), or the zero
// value (select rules, budgets).
type ToolEnv struct {
	Name string `expr:"name"`
	// Tier is read_only, side_effecting or privileged.
	Tier   string   `expr:"tier"`
	Source string   `expr:"source"`
	Tags   []string `expr:"tags"`
}

// CallEnv is the call being decided on, after the before hooks; the zero
// value outside rules.
type CallEnv struct {
	ID   string `expr:"id"`
	Tool string `expr:"tool"`
	// Args are the validated arguments (JSON numbers are float64).
	Args map[string]any `expr:"args"`
	// Paths are the path arguments (see docs/policy.md, "Paths and
	// commands"), cleaned: "src/../.env" reads ".env".
	Paths []string `expr:"paths"`
	// Argv is the command's argument vector and Command the same joined by
	// spaces.
	Argv    []string `expr:"argv"`
	Command string   `expr:"command"`
}

// inputFieldSet binds the keys of a test input's session and run sections
// to what they set.
type inputFieldSet struct{ session, run, agent map[string]reflect.Value }

// inputFields binds each key of a test input's session: and run: sections
// (the env's own names) to the kernel.State field it sets: an input
// decodes straight into the State fillState reads, so an env field that
// comes from a State field is settable in tests with one line here
// (docs/architecture.md, "Adding a field policy and hooks see"). Derived
// fields (tokens, tools, elapsed's times) are not set directly.
func inputFields(st *kernel.State, sessionElapsed, runElapsed *time.Duration) inputFieldSet {
	v := func(p any) reflect.Value { return reflect.ValueOf(p).Elem() }
	return inputFieldSet{
		session: map[string]reflect.Value{
			"id": v(&st.SessionID), "model": v(&st.Model), "labels": v(&st.Labels),
			"turns": v(&st.SessionTotals.Turns), "tokens_in": v(&st.SessionTotals.Usage.InputTokens),
			"tokens_out": v(&st.SessionTotals.Usage.OutputTokens), "cost_usd": v(&st.SessionTotals.CostUSD),
			"elapsed": v(sessionElapsed), "tool_calls": v(&st.ToolCounts),
		},
		run: map[string]reflect.Value{
			"number": v(&st.Run), "turn": v(&st.Turn), "max_turns": v(&st.MaxTurns), "prompt": v(&st.Prompt),
			"tokens_in": v(&st.RunTotals.Usage.InputTokens), "tokens_out": v(&st.RunTotals.Usage.OutputTokens),
			"cost_usd": v(&st.RunTotals.CostUSD), "elapsed": v(runElapsed), "calls": v(&st.RunCalls),
			"corrections": v(&st.Corrections),
		},
		agent: map[string]reflect.Value{
			"name": v(&st.Agent.Name), "depth": v(&st.Agent.Depth), "parent": v(&st.Agent.Parent), "chain": v(&st.Agent.Chain),
		},
	}
}

// envPool recycles environments: building one per decision must not
// allocate more than the derived slices.
var envPool = sync.Pool{New: func() any { return new(Env) }}

// sections are the parts of an Env one evaluation fills: those from the
// State (fillSections) and those its caller sets (the tool, the call,
// memory's). A pooled Env is zero outside what was filled, and putEnv
// clears only what was filled, so an evaluation that names few sections
// (a budget reading run.turn) neither fills nor clears the rest.
type sections uint16

const (
	secSession sections = 1 << iota
	secRun              // run and turn (turn reads run through a pointer)
	secContext
	secAgent
	secHooks
	secNow
	secTool
	secCall
	secMemory // memory and hit
	secChunk
	secAll sections = 1<<iota - 1
	// secState are the sections fillSections fills from the State.
	secState = secSession | secRun | secContext | secAgent | secHooks | secNow
)

// stateWords finds the names of the State's sections in an expression's
// source, and $env, through which any field can be read by name.
var stateWords = regexp.MustCompile(`\$env\b|\b(session|run|turn|context|agent|hooks|now)\b`)

// sectionsOf returns the State sections the sources can read: those whose
// root name they hold anywhere (in a string too: more is filled, never
// less), every one when they hold $env. A field is read only through its
// root's name (Env has no methods, expr's builtins do not read the
// environment, v.<name> is inlined from its source), so an unnamed
// section is never read and may stay zero. TestSectionsOf and
// TestBudgetReadsEverySection hold it.
func sectionsOf(srcs ...string) sections {
	var s sections
	for _, src := range srcs {
		for _, m := range stateWords.FindAllStringSubmatch(src, -1) {
			switch m[1] {
			case "":
				return secState
			case "session":
				s |= secSession
			case "run", "turn":
				s |= secRun
			case "context":
				s |= secContext
			case "agent":
				s |= secAgent
			case "hooks":
				s |= secHooks
			case "now":
				s |= secNow
			}
		}
	}
	return s
}

func getEnv() *Env { return envPool.Get().(*Env) }

// putEnv returns e to the pool with every section zero: all of it, or
// only those filled (secs).
func putEnv(e *Env) { putEnvSections(e, secAll) }

func putEnvSections(e *Env, secs sections) {
	calls, tools := e.keptCalls[:0], e.keptTools[:0]
	clear(e.paths[:cap(e.paths)])
	paths := e.paths[:0]
	if secs == secAll {
		*e = Env{}
	} else {
		if secs&secSession != 0 {
			e.Session = SessionEnv{}
		}
		if secs&secRun != 0 {
			e.Run = RunEnv{}
		}
		e.Run.Phase, e.Turn = "", TurnEnv{}
		if secs&secContext != 0 {
			e.Context = ContextEnv{}
		}
		if secs&secAgent != 0 {
			e.Agent = AgentEnv{}
		}
		if secs&secHooks != 0 {
			e.Hooks = kernel.HookVerdicts{}
		}
		if secs&secNow != 0 {
			e.Now = time.Time{}
		}
		if secs&secTool != 0 {
			e.Tool = ToolEnv{}
		}
		if secs&secCall != 0 {
			e.Call = CallEnv{}
		}
		if secs&secMemory != 0 {
			e.Memory, e.Hit = MemoryEnv{}, MemoryHit{}
		}
		if secs&secChunk != 0 {
			e.Chunk = MemoryChunk{}
		}
	}
	e.Run.Calls, e.Run.Tools = nil, nil
	e.keptCalls, e.keptTools, e.paths = calls, tools, paths
	envPool.Put(e)
}

// fillState maps the kernel's State into e (session, turn, now).
func (e *Env) fillState(st *kernel.State) { e.fillSections(st, secState) }

// fillSections maps the sections secs of the kernel's State into e.
func (e *Env) fillSections(st *kernel.State, secs sections) {
	if st == nil {
		e.fillTurn()
		return
	}
	if secs&secNow != 0 {
		e.Now = st.Now
	}
	if secs&secSession != 0 {
		e.Session = SessionEnv{
			ID: st.SessionID, Model: st.Model, Runs: st.Run, Turns: st.SessionTotals.Turns,
			TokensIn: int(st.SessionTotals.Usage.InputTokens), TokensOut: int(st.SessionTotals.Usage.OutputTokens), Tokens: int(st.SessionTotals.Usage.Total()),
			CostUSD: st.SessionTotals.CostUSD, Elapsed: since(st.Now, st.SessionCreated),
			ToolCalls: st.ToolCounts, Labels: st.Labels,
		}
	}
	if secs&secContext != 0 {
		e.Context = ContextEnv{Used: st.Context.Used, Window: st.Context.Window, Fraction: st.Context.Fraction}
	}
	if secs&secAgent != 0 {
		e.Agent = AgentEnv{Name: st.Agent.Name, Depth: st.Agent.Depth, Parent: st.Agent.Parent, Chain: st.Agent.Chain}
	}
	if secs&secHooks != 0 {
		e.Hooks = st.Hooks
	}
	if secs&secRun == 0 {
		return
	}
	calls, tools := e.fillCalls(st)
	e.Run = RunEnv{
		Number: st.Run, Turn: st.Turn, MaxTurns: st.MaxTurns, Prompt: st.Prompt,
		TokensIn: int(st.RunTotals.Usage.InputTokens), TokensOut: int(st.RunTotals.Usage.OutputTokens), Tokens: int(st.RunTotals.Usage.Total()),
		CostUSD: st.RunTotals.CostUSD, Elapsed: since(st.Now, st.RunStarted),
		Tools: tools, Calls: calls, Corrections: st.Corrections,
	}
	e.fillTurn()
}

// fillCalls returns run.calls and run.tools for st, built in e's kept
// storage. A run without calls has both nil, whatever the pool held, as an
// Env never pooled has them: what a policy reads (toJSON(run.tools) is
// null) does not depend on the pool (TestBudgetReadsEveryRunField).
func (e *Env) fillCalls(st *kernel.State) ([]CallOutcome, []string) {
	if len(st.RunCalls) == 0 {
		return nil, nil
	}
	calls, tools := e.keptCalls[:0], e.keptTools[:0]
	for _, c := range st.RunCalls {
		calls = append(calls, CallOutcome{Tool: c.Tool, Outcome: string(c.Outcome)})
		tools = append(tools, c.Tool)
	}
	e.keptCalls, e.keptTools = calls, tools
	return calls, tools
}

// runFields is a set of RunEnv's fields: those a budget reads when its
// expressions name the run section only as run.<field> (runFieldsOf).
// Budget then fills (fillRunFields) and clears (clearRunFields) only
// those, not the whole section with run.calls and run.tools rebuilt
// from the State three times a run.
type runFields uint16

const (
	rfNumber runFields = 1 << iota
	rfTurn
	rfMaxTurns
	rfPrompt
	rfTokensIn
	rfTokensOut
	rfTokens
	rfCostUSD
	rfElapsed
	rfCalls // run.calls and run.tools
	rfCorrections
	rfAll runFields = 1<<iota - 1
)

// runFieldBits maps each expr name of RunEnv's fields to its bit; phase is
// 0: budget sets it itself. TestRunFieldBitsNameEveryField holds it to
// RunEnv's tags, so a field added to RunEnv without a bit fails a test
// (and reads as rfAll here until it has one).
var runFieldBits = map[string]runFields{
	"number": rfNumber, "turn": rfTurn, "max_turns": rfMaxTurns, "prompt": rfPrompt,
	"tokens_in": rfTokensIn, "tokens_out": rfTokensOut, "tokens": rfTokens, "cost_usd": rfCostUSD,
	"elapsed": rfElapsed, "calls": rfCalls, "tools": rfCalls, "corrections": rfCorrections, "phase": 0,
}

// runWords finds $env, the deprecated turn, and each run with the field
// name right after its dot, if any.
var runWords = regexp.MustCompile(`\$env\b|\bturn\b|\brun\b(?:\.([A-Za-z_][A-Za-z0-9_]*))?`)

// runFieldsOf returns the run fields the sources can read: rfAll unless
// every "run" in them (in a string or a longer path too: more is filled,
// never less) is followed at once by ".<field>" of a known field, and none
// holds turn (which reads the run through a pointer) or $env. A field is
// read only through its name after "run." then: run alone (toJSON(run),
// let r = run, [run], run?.x, run ["x"], run . x) matches without a field
// and gives rfAll. TestRunFieldsOf and TestBudgetReadsEveryRunField hold
// it.
func runFieldsOf(srcs ...string) runFields {
	var rf runFields
	for _, src := range srcs {
		for _, m := range runWords.FindAllStringSubmatch(src, -1) {
			bit, ok := runFieldBits[m[1]]
			if m[1] == "" || !ok {
				return rfAll
			}
			rf |= bit
		}
	}
	return rf
}

// fillRunFields sets the fields rf of the run section from st, as
// fillSections sets them (rf is never rfAll: that is fillSections' job).
func (e *Env) fillRunFields(st *kernel.State, rf runFields) {
	r := &e.Run
	if rf&rfNumber != 0 {
		r.Number = st.Run
	}
	if rf&rfTurn != 0 {
		r.Turn = st.Turn
	}
	if rf&rfMaxTurns != 0 {
		r.MaxTurns = st.MaxTurns
	}
	if rf&rfPrompt != 0 {
		r.Prompt = st.Prompt
	}
	if rf&rfTokensIn != 0 {
		r.TokensIn = int(st.RunTotals.Usage.InputTokens)
	}
	if rf&rfTokensOut != 0 {
		r.TokensOut = int(st.RunTotals.Usage.OutputTokens)
	}
	if rf&rfTokens != 0 {
		r.Tokens = int(st.RunTotals.Usage.Total())
	}
	if rf&rfCostUSD != 0 {
		r.CostUSD = st.RunTotals.CostUSD
	}
	if rf&rfElapsed != 0 {
		r.Elapsed = since(st.Now, st.RunStarted)
	}
	if rf&rfCalls != 0 {
		r.Calls, r.Tools = e.fillCalls(st)
	}
	if rf&rfCorrections != 0 {
		r.Corrections = st.Corrections
	}
}

// clearRunFields zeroes what fillRunFields(rf) set: the fill of a zero
// State (no calls: run.calls and run.tools nil, their storage kept).
func (e *Env) clearRunFields(rf runFields) { e.fillRunFields(&zeroState, rf) }

// zeroState is the State clearRunFields fills from; never written.
var zeroState kernel.State

// fillTurn sets the deprecated turn section from the run section.
func (e *Env) fillTurn() {
	e.Turn = TurnEnv{RunEnv: &e.Run, Round: e.Run.Turn, MaxRounds: e.Run.MaxTurns}
}

func since(now, then time.Time) time.Duration {
	if then.IsZero() || now.IsZero() || now.Before(then) {
		return 0
	}
	return now.Sub(then)
}

func (e *Env) fillTool(spec *kernel.ToolSpec) {
	e.Tool = ToolEnv{Name: spec.Name, Tier: string(spec.Tier), Source: spec.Source, Tags: spec.Tags}
}

// fillCall maps a call: its tool, its arguments, and the paths and command
// the tool's schema marks (see extractor).
func (e *Env) fillCall(c *kernel.Call, ex *extractor) {
	spec := c.Tool()
	e.fillCallSpec(c, &spec, ex)
}

// fillCallSpec is fillCall with the call's spec (c.Tool()) already copied
// out.
func (e *Env) fillCallSpec(c *kernel.Call, spec *kernel.ToolSpec, ex *extractor) {
	e.fillTool(spec)
	args := c.Value()
	e.Call = CallEnv{ID: c.ID(), Tool: spec.Name, Args: args, Paths: e.paths[:0]}
	ex.extract(args, &e.Call)
	for _, p := range c.TouchedPaths() {
		e.Call.Paths = append(e.Call.Paths, cleanPath(p))
	}
	// Keep the (possibly grown) storage for the next use; a call without
	// paths still sees call.paths as nil, as it did before the storage was
	// kept.
	e.paths = e.Call.Paths[:0]
	if len(e.Call.Paths) == 0 {
		e.Call.Paths = nil
	}
}

// cleanPath normalises a path argument so that prefix tests cannot be
// bypassed with "..", "." or doubled slashes: "src/../.env" becomes ".env",
// "./src//a.go" becomes "src/a.go". Backslashes are treated as separators.
func cleanPath(p string) string {
	if p == "" {
		return ""
	}
	p = strings.ReplaceAll(p, "\\", "/")
	c := path.Clean(p)
	if c == "." {
		return "."
	}
	return strings.TrimPrefix(c, "./")
}
