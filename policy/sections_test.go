package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

func TestSectionsOf(t *testing.T) {
	for _, c := range []struct {
		src  string
		want sections
	}{
		{`call.args.path contains ".env"`, 0},
		{`tool.tier == "privileged" && len(call.paths) > 2`, 0},
		{`run.turn > budget.max_turns`, secRun},
		{`turn.round > 3`, secRun},
		{`session.tokens > 10 || now.Hour() > 20`, secSession | secNow},
		{`context.fraction > 0.8`, secContext},
		{`agent.depth > 0 && hooks.before_model.blocked`, secAgent | secHooks},
		{`$env.session.tokens > 1`, secState},
		{`$env["se" + "ssion"]["tokens"] > 1`, secState},
		{`call.args.note == "session"`, secSession}, // a string: more, never less
		{`call.args.sessions > 1 || call.args.running`, 0},
	} {
		if got := sectionsOf(c.src); got != c.want {
			t.Errorf("sectionsOf(%s) = %b, want %b", c.src, got, c.want)
		}
	}
}

// sectionCases are expressions that each read one section of the State
// (directly, through a var, or through $env) and hold only with the
// State sectionState gives them: evaluated with that section left zero,
// each is false.
var sectionCases = []struct{ name, vars, expr string }{
	{"session", "", `session.tokens_in > 10`},
	{"session-labels", "", `session.labels.team == "infra"`},
	{"run", "", `run.turn > 1`},
	{"run-calls", "", `len(run.calls) == 1 && run.tools[0] == "read_file"`},
	{"turn", "", `turn.round > 1`},
	{"context", "", `context.fraction > 0.5`},
	{"agent", "", `agent.depth > 0`},
	{"hooks", "", `hooks.before_model.blocked`},
	{"now", "", `now.Year() > 2000`},
	{"var", "vars:\n  big: session.tokens_in > 10\n", `v.big`},
	{"env", "", `$env.context.fraction > 0.5`},
	{"env-index", "", `$env["ag" + "ent"]["depth"] > 0`},
}

func sectionState() *kernel.State {
	st := &kernel.State{Run: 1, Turn: 2, MaxTurns: 50, ToolCounts: map[string]int{"read_file": 1},
		Labels: map[string]string{"team": "infra"}, Now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC),
		RunCalls: []kernel.CallOutcome{{Tool: "read_file", Outcome: kernel.OutcomeOK}}}
	st.SessionTotals.Usage.InputTokens = 20
	st.Context = kernel.ContextUse{Used: 6, Window: 10, Fraction: 0.6}
	st.Agent.Depth = 1
	st.Hooks.BeforeModel.Blocked = true
	return st
}

// TestBudgetReadsEverySection: a budget sees each section it names, read
// directly, through a var or through $env, although Budget fills only the
// sections its expressions name (sectionsOf).
func TestBudgetReadsEverySection(t *testing.T) {
	for _, c := range sectionCases {
		p := compileT(t, "name: b\nrevision: \"1\"\ndefaults: {tool_call: allow}\n"+c.vars+"budgets:\n  - id: b\n    stop_when: '"+c.expr+"'\n")
		for range 3 { // pooled environments are reused
			if v := p.Budget(context.Background(), sectionState(), kernel.BeforeModel); v.Stop == nil {
				t.Fatalf("%s: %s did not stop the run", c.name, c.expr)
			}
			if v := p.Budget(context.Background(), &kernel.State{}, kernel.BeforeModel); v.Stop != nil {
				t.Fatalf("%s: %s stopped a run with a zero State", c.name, c.expr)
			}
		}
	}
}

// TestRulesReadEverySection: the same for a rule, which Decide evaluates
// with the sections the rules of the call's tool name.
func TestRulesReadEverySection(t *testing.T) {
	for _, c := range sectionCases {
		p := compileT(t, "name: r\nrevision: \"1\"\ndefaults: {tool_call: allow}\n"+c.vars+"rules:\n  - id: r\n    effect: deny\n    tools: [read_file]\n    when: '"+c.expr+"'\n")
		for range 3 {
			if d := decideOn(t, p, builtin("read_file"), `{"path":"a.go"}`, sectionState()); d.Effect != kernel.EffectDeny {
				t.Fatalf("%s: %s was not applied: %+v", c.name, c.expr, d)
			}
			if d := decideOn(t, p, builtin("read_file"), `{"path":"a.go"}`, &kernel.State{}); d.Effect != kernel.EffectAllow {
				t.Fatalf("%s: %s applied with a zero State: %+v", c.name, c.expr, d)
			}
		}
	}
}

// TestPooledEnvHoldsNothingStale: what one evaluation filled (a call, a
// tool, a budget's phase, the State's sections) is zero in the next, which
// fills other sections.
func TestPooledEnvHoldsNothingStale(t *testing.T) {
	p := compileT(t, `name: s
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: phase
    effect: deny
    tools: [read_file]
    when: run.phase != "" || session.tokens_in > 0
budgets:
  - id: leftovers
    stop_when: call.tool != "" || tool.name != "" || len(call.paths) > 0 || call.args != nil || session.tokens_in > 0
`)
	st := &kernel.State{Run: 1, Turn: 1, ToolCounts: map[string]int{}}
	full := sectionState()
	for range 50 {
		if d := decideOn(t, p, builtin("read_file"), `{"path":"a.go"}`, st); d.Effect != kernel.EffectAllow {
			t.Fatalf("a decision saw a budget's leftovers: %+v", d)
		}
		if v := p.Budget(context.Background(), st, kernel.AfterTools); v.Stop != nil {
			t.Fatalf("a budget saw a decision's leftovers: %+v", v.Stop)
		}
		// A full evaluation of the other State's sections, then the
		// policy's again with the first State.
		env, m := borrow(full)
		giveBack(env, m)
	}
}

// TestRulesReadsIsTheSourcesScan: a tool entry's read sections, from each
// rule's cached sections (rule.readSections), are the scan of all its
// rules' sources at once (what rulesReads computed before the cache), for
// every tool name of random policies, and stay so when asked again (the
// cached path). Rules reading nothing, one section, several, and $env
// (secState) are among them.
func TestRulesReadsIsTheSourcesScan(t *testing.T) {
	extra := []string{`session.tokens > 10`, `run.turn > 3 && now.Hour() > 1`, `$env.context.fraction > 0.5`, `agent.depth > 0`}
	seen := map[sections]bool{}
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 11))
		src := randPolicy(rng, 30)
		// A few rules that read State sections, on every tool or on some.
		var b strings.Builder
		for i, w := range extra {
			if rng.IntN(2) == 0 {
				continue
			}
			fmt.Fprintf(&b, "  - id: x%d\n    effect: deny\n    tools: [%s]\n    when: '%s'\n", i, []string{`"*"`, "g*", "a"}[rng.IntN(3)], w)
		}
		src = strings.Replace(src, "rules:\n", "rules:\n"+b.String(), 1)
		p := compileForTest(t, src)
		for round := range 2 {
			for _, tool := range randCallTools {
				rules := p.rulesFor(tool)
				srcs := make([]string, 0, 2*len(rules))
				for _, r := range rules {
					srcs = append(srcs, progSrc(r.when), progSrc(r.message))
				}
				want := p.varReads() | sectionsOf(srcs...)
				if got := p.rulesReads(rules); got != want {
					t.Fatalf("seed %d, round %d, tool %s: rulesReads = %b, the scan of its %d rules' sources %b", seed, round, tool, got, len(rules), want)
				}
				seen[want] = true
			}
		}
	}
	if len(seen) < 3 || !seen[secState] {
		t.Fatalf("the entries read only %v: the comparison proves little", seen)
	}
}
