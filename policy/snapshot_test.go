package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// richPolicy uses every part of a file a snapshot carries: budget
// constants of each type, vars (one using another), surfaces with sets,
// a default, select and drop rules, rules with and without tools, guards
// of each kind, dry-run rules, messages, budgets, and a deprecated name.
const richPolicy = `name: rich
revision: "7"
defaults: {tool_call: ask, ask: ask}
budget:
  max_cost: 0.5
  max_turns: 12
  strict: true
  team: core
  slow: 90s
vars:
  program: 'len(call.argv) > 0 ? call.argv[0] : ""'
  risky: v.program in ["rm", "dd"] || call.command contains "--force"
  costly: run.cost_usd > budget.max_cost
surfaces:
  sets:
    reads: [read_file, list_dir, search]
    all: ["*"]
  default: all
  select:
    - id: question
      when: not (run.prompt matches "(?i)fix|change")
      surface: reads
  drop:
    - id: quiet
      tools: ["run_*"]
      when: session.labels.team == budget.team && run.turn > 3
rules:
  - id: no-risky
    effect: deny
    tools: [run_command]
    when: v.risky
    message: '"refused: " + v.program'
  - id: cmd-prefix
    effect: deny
    when: call.command matches "^git push( |$)"
  - id: ticket
    effect: allow
    when: call.args.ticket == "T-1" && session.turns < 500
  - id: modes
    effect: ask
    tools: [write_file, edit_file]
    when: call.args.mode in ["force", "overwrite"]
  - id: paths
    effect: ask
    when: any(call.paths, {# startsWith "secret/"})
  - id: starts
    effect: deny
    when: call.command startsWith "curl "
  - id: number
    effect: allow
    when: call.args.n == 3
  - id: trial
    effect: deny
    mode: dryrun
    when: turn.round > 5
  - id: reads
    effect: allow
    tools: [read_file, list_dir, search]
  - id: late
    effect: deny
    when: run.turn >= budget.max_turns && budget.strict
budgets:
  - id: cost
    warn_when: v.costly
    stop_when: run.cost_usd > 2 * budget.max_cost
    message: '"spent " + string(run.cost_usd)'
    wrap_up: true
  - id: time
    warn_when: run.elapsed > budget.slow
tests:
  - name: rm
    input: {call: {tool: run_command, args: {argv: [rm, -rf, x]}}}
    expect: {decision: deny, rules: [no-risky], message: "refused: rm"}
  - name: push
    input: {call: {tool: run_command, args: {argv: [git, push, origin]}}}
    expect: {decision: deny, rules: [cmd-prefix]}
  - name: ticket
    input: {call: {tool: fetch, args: {ticket: T-1}}}
    expect: {decision: allow, rules: [ticket]}
  - name: mode
    input: {call: {tool: write_file, args: {path: a, content: b, mode: force}}}
    expect: {decision: ask, rules: [modes]}
  - name: secret
    input: {call: {tool: read_file, args: {path: secret/k}}}
    expect: {decision: ask, rules: [paths]}
  - name: curl
    input: {call: {tool: run_command, args: {argv: [curl, x]}}}
    expect: {decision: deny, rules: [starts]}
  - name: number
    input: {call: {tool: fetch, args: {n: 3}}}
    expect: {decision: allow, rules: [number]}
  - name: trial
    input: {run: {turn: 6}, call: {tool: list_dir, args: {path: .}}}
    expect: {decision: allow, rules: [reads], would_deny: [trial]}
  - name: reads
    input: {call: {tool: search, args: {query: x}}}
    expect: {decision: allow, rules: [reads]}
  - name: late
    input: {run: {turn: 12}, call: {tool: fetch, args: {url: x}}}
    expect: {decision: deny, rules: [late]}
  - name: question
    input: {run: {prompt: what is this}}
    expect: {surface: reads}
  - name: quiet
    input: {session: {labels: {team: core}}, run: {turn: 4, prompt: fix it}, tools: [run_command, read_file]}
    expect: {offered: [read_file], not_offered: [run_command]}
  - name: cost
    input: {run: {cost_usd: 1.5}}
    expect: {stop: cost, warnings: [cost], wrap_up: true}
  - name: time
    input: {run: {elapsed: 2m}}
    expect: {warnings: [time]}
`

// situation is one input the policies are compared on: the same state and
// call given to Decide, Surface and Budget, and, as an Input, to Explain.
type situation struct {
	tool, args, team, prompt string
	turn                     int
	cost                     float64
}

func (s situation) state() *kernel.State {
	st := &kernel.State{SessionID: "s", Run: 1, Turn: s.turn, Prompt: s.prompt, ToolCounts: map[string]int{"read_file": 2},
		RunTotals: kernel.Totals{CostUSD: s.cost}, Now: policy.DefaultNow}
	if s.team != "" {
		st.Labels = map[string]string{"team": s.team}
	}
	return st
}

func (s situation) input(t *testing.T) policy.Input {
	t.Helper()
	labels := "{}"
	if s.team != "" {
		labels = fmt.Sprintf("{team: %s}", s.team)
	}
	src := fmt.Sprintf("session: {labels: %s, tool_calls: {read_file: 2}}\nrun: {turn: %d, prompt: %q, cost_usd: %g}\ncall: {tool: %s, args: %s}\n",
		labels, s.turn, s.prompt, s.cost, s.tool, s.args)
	in, err := policy.ParseInput("situation.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// situations are the calls the comparison makes: for a sample of the
// generated rules' numbers, calls that match the rules of each shape (and
// near misses), on built-in tools and the generated ones, with several
// states.
func situations(n int) []situation {
	var out []situation
	for _, i := range []int{0, 1, 2, 7, 8, 9, 19, 20, n / 3, n/2 - 1, n / 2, n - 1, n, n + 1} {
		args := []string{
			fmt.Sprintf(`{"argv":["cmd%d","x"]}`, i), fmt.Sprintf(`{"argv":["cmd%d-x"]}`, i), fmt.Sprintf(`{"ticket":"T-%d"}`, i),
			fmt.Sprintf(`{"argv":["x","bad%d"]}`, i), fmt.Sprintf(`{"path":"dir%d/x"}`, i), fmt.Sprintf(`{"path":"g%d/x"}`, i),
			fmt.Sprintf(`{"n":%d}`, i), fmt.Sprintf(`{"mode":"m%d"}`, i), fmt.Sprintf(`{"k":"k%d"}`, i), fmt.Sprintf(`{"argv":["p%d"]}`, i),
			fmt.Sprintf(`{"argv":["a","x%d"]}`, i), fmt.Sprintf(`{"argv":["tool%d","x"]}`, i), `{"mode":"x"}`,
			`{"argv":["rm","-rf","x"]}`, `{"argv":["git","push"]}`, `{"argv":["curl","x"]}`, `{"path":"secret/k"}`,
			`{"mode":"force","path":"a"}`, `{"n":3}`, `{"ticket":"T-1"}`, `{}`,
		}
		tools := []string{"run_command", "read_file", "write_file", fmt.Sprintf("svc%d.op", i%max(n/10, 1)), fmt.Sprintf("blocked%d", i), fmt.Sprintf("other%d", i)}
		for j, a := range args {
			for k, tool := range tools {
				if (j+k+i)%3 != 0 && tool != "run_command" {
					continue // a sample: every argument set on run_command, a third elsewhere
				}
				s := situation{tool: tool, args: a, turn: 1 + (i+j)%14, prompt: []string{"fix the build", "what is this"}[(i+k)%2]}
				if (i+j)%4 == 0 {
					s.team = fmt.Sprintf("t%d", i)
				}
				if (i+j+k)%5 == 0 {
					s.team, s.cost = "core", 1.5
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// specFor is the spec of a tool name: a built-in's, or a bare one.
func specFor(name string) kernel.ToolSpec {
	for _, s := range policy.BuiltinSpecs() {
		if s.Name == name {
			return s
		}
	}
	return kernel.ToolSpec{Name: name, Tier: kernel.TierReadOnly}
}

// explainEvery: one situation in explainEvery is explained too (an
// explanation evaluates every rule that applies to the tool and compiles
// what each one reads: the costly part of the comparison).
const explainEvery = 9

// sameBehaviour fails unless got (loaded from the snapshot) behaves as
// want (a full load of the same file) on every situation: decisions,
// surfaces, budgets, explanations, its own tests, and a diff between the
// two that finds nothing changed.
func sameBehaviour(t *testing.T, want, got *policy.Policy, sits []situation) {
	t.Helper()
	ctx := context.Background()
	if got.Name() != want.Name() || got.Revision() != want.Revision() || got.SHA256() != want.SHA256() || got.File() != want.File() {
		t.Fatalf("identity: got %s %s %s %s, want %s %s %s %s", got.Name(), got.Revision(), got.SHA256(), got.File(),
			want.Name(), want.Revision(), want.SHA256(), want.File())
	}
	if !reflect.DeepEqual(got.Deprecated(), want.Deprecated()) {
		t.Fatalf("deprecated: got %v, want %v", got.Deprecated(), want.Deprecated())
	}
	var specs []kernel.ToolSpec
	seen := map[string]bool{}
	for _, s := range sits {
		if !seen[s.tool] {
			seen[s.tool] = true
			specs = append(specs, specFor(s.tool))
		}
	}
	decided := map[kernel.Effect]int{}
	for i, s := range sits {
		st := s.state()
		c, err := kernel.NewCall("c1", specFor(s.tool), json.RawMessage(s.args), st)
		if err != nil {
			t.Fatal(err)
		}
		dw, dg := want.Decide(ctx, st, c), got.Decide(ctx, st, c)
		dw.ID, dg.ID, dw.EvalTime, dg.EvalTime = "", "", 0, 0
		if !reflect.DeepEqual(dg, dw) {
			t.Fatalf("%+v: decision from the snapshot %+v, from the file %+v", s, dg, dw)
		}
		decided[dw.Effect]++
		if sw, sg := want.Surface(ctx, st, specs), got.Surface(ctx, st, specs); !reflect.DeepEqual(sg, sw) {
			t.Fatalf("%+v: surface from the snapshot %v, from the file %v", s, sg, sw)
		}
		for _, phase := range []kernel.BudgetPhase{kernel.BeforeModel, kernel.AfterTools} {
			if bw, bg := want.Budget(ctx, st, phase), got.Budget(ctx, st, phase); !reflect.DeepEqual(bg, bw) {
				t.Fatalf("%+v: budget from the snapshot %+v, from the file %+v", s, bg, bw)
			}
		}
		if i%explainEvery != 0 {
			continue
		}
		in := s.input(t)
		xw, errW := want.Explain(in)
		xg, errG := got.Explain(in)
		if fmt.Sprint(errW) != fmt.Sprint(errG) || !reflect.DeepEqual(xg, xw) {
			t.Fatalf("%+v: explanation from the snapshot %+v (%v), from the file %+v (%v)", s, xg, errG, xw, errW)
		}
	}
	if len(decided) < 2 {
		t.Fatalf("every situation got the same effect (%v): the comparison proves little", decided)
	}
	rw, err := want.RunTests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rg, err := got.RunTests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rg.Passed() || !reflect.DeepEqual(rg.Results, rw.Results) || !reflect.DeepEqual(rg.Untested, rw.Untested) {
		t.Fatalf("tests from the snapshot: %+v, from the file: %+v", rg, rw)
	}
	// policy diff and coverage: the file against its snapshot changes no
	// decision, and both sides cover the same rules.
	d := policy.NewDiff(want, got, policy.DiffOptions{Tools: specs})
	sess := &kernel.Session{Meta: kernel.SessionMeta{ID: "s1"}}
	add := func(m kernel.Message) {
		m.Seq = uint64(len(sess.Messages) + 1)
		sess.Messages = append(sess.Messages, m)
	}
	add(kernel.Message{Role: kernel.RoleUser, Content: "fix the build"})
	for i, s := range sits {
		id := fmt.Sprintf("c%d", i)
		add(kernel.Message{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: id, Name: s.tool, Arguments: s.args}}})
		add(kernel.Message{Role: kernel.RoleTool, ToolCallID: id, ToolName: s.tool, Content: "ok"})
	}
	if err := d.Add(ctx, sess); err != nil {
		t.Fatal(err)
	}
	rep := d.Report()
	if rep.Calls != len(sits) || rep.Changed != 0 || len(rep.SurfaceChanges) != 0 || !reflect.DeepEqual(rep.Coverage.Old, rep.Coverage.New) {
		t.Fatalf("diff of the file against its snapshot: %d calls, changes %+v, coverage %+v / %+v", rep.Calls, rep.Changes, rep.Coverage.Old, rep.Coverage.New)
	}
}

// loadBothWays loads src in full (no cache) and from the snapshot a first
// cached load wrote.
func loadBothWays(t *testing.T, name string, src []byte, tools []kernel.ToolSpec) (full, snap *policy.Policy) {
	t.Helper()
	ctx := context.Background()
	opts := policy.Options{Tools: tools}
	full, err := policy.Load(ctx, name, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Cache = &policy.VerdictCache{Dir: filepath.Join(t.TempDir(), "cache"), Build: "test-build"}
	first, err := policy.Load(ctx, name, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if v := first.TestVerdict(); v.Cached || v.CacheNote != "" || policy.FromSnapshot(first) {
		t.Fatalf("first load: %+v", v)
	}
	snap, err = policy.Load(ctx, name, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if v := snap.TestVerdict(); !v.Cached || v.CacheNote != "" || v.Tests != full.TestVerdict().Tests || !policy.FromSnapshot(snap) {
		t.Fatalf("second load: %+v, from the snapshot: %t", v, policy.FromSnapshot(snap))
	}
	return full, snap
}

// TestSnapshotBehavesAsFullLoad loads policies of each index shape, a
// policy using every part of the format, and the example policies both in
// full and from the test cache's snapshot, and compares what they do.
func TestSnapshotBehavesAsFullLoad(t *testing.T) {
	const n = 300
	cases := map[string]string{"rich": richPolicy}
	for _, shape := range shapes {
		cases[shape] = genShape(shape, n)
	}
	examples, _ := filepath.Glob("../examples/policies/*.yaml")
	if len(examples) == 0 {
		t.Fatal("no example policies")
	}
	for _, f := range examples {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases[filepath.Base(f)] = string(b)
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			full, snap := loadBothWays(t, name, []byte(src), nil)
			sameBehaviour(t, full, snap, situations(n))
		})
	}
}

// TestSnapshotConcurrentFirstUse decides from many goroutines at once on a
// policy fresh from its snapshot, so that rules compile on first use
// concurrently (the race detector checks the compile-once), and each
// goroutine gets the decision a full load gives.
func TestSnapshotConcurrentFirstUse(t *testing.T) {
	const n = 2000
	full, snap := loadBothWays(t, "regex.yaml", []byte(genShape("mixed", n)), nil)
	sits := situations(n)
	ctx := context.Background()
	type outcome struct {
		effect kernel.Effect
		rules  []string
		msg    string
	}
	want := make([]outcome, len(sits))
	for i, s := range sits {
		st := s.state()
		c, err := kernel.NewCall("c", specFor(s.tool), json.RawMessage(s.args), st)
		if err != nil {
			t.Fatal(err)
		}
		d := full.Decide(ctx, st, c)
		want[i] = outcome{d.Effect, d.Rules, d.Message}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for k := range sits {
				i := (k + g*len(sits)/8) % len(sits) // each goroutine starts elsewhere
				s := sits[i]
				st := s.state()
				c, err := kernel.NewCall("c", specFor(s.tool), json.RawMessage(s.args), st)
				if err != nil {
					errs <- err.Error()
					return
				}
				d := snap.Decide(ctx, st, c)
				if got := (outcome{d.Effect, d.Rules, d.Message}); !reflect.DeepEqual(got, want[i]) {
					errs <- fmt.Sprintf("%+v: %+v, want %+v", s, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestSnapshotEditedRuleRunsTests: editing one rule of a file whose
// snapshot is cached loads the new bytes in full and runs the tests, and
// an edit that breaks a test fails the load although the cache holds the
// old version's snapshot.
func TestSnapshotEditedRuleRunsTests(t *testing.T) {
	const n = 1000
	src := genShape("regex", n)
	ctx := context.Background()
	cache := &policy.VerdictCache{Dir: filepath.Join(t.TempDir(), "cache"), Build: "test-build"}
	opts := policy.Options{Cache: cache}
	if _, err := policy.Load(ctx, "edit.yaml", []byte(src), opts); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(ctx, "edit.yaml", []byte(src), opts)
	if err != nil || !policy.FromSnapshot(p) {
		t.Fatalf("second load: %v (from the snapshot: %t)", err, err == nil && policy.FromSnapshot(p))
	}
	edited := strings.Replace(src, `"^cmd7( |$)"`, `"^cmd7( |$|-)"`, 1)
	p, err = policy.Load(ctx, "edit.yaml", []byte(edited), opts)
	if err != nil {
		t.Fatal(err)
	}
	if v := p.TestVerdict(); v.Cached || v.Evaluated < n || policy.FromSnapshot(p) {
		t.Fatalf("after editing one rule: %+v: want the tests run", v)
	}
	st := &kernel.State{Run: 1, Turn: 1, Now: time.Now()}
	c, err := kernel.NewCall("c", specFor("run_command"), json.RawMessage(`{"argv":["cmd7-x"]}`), st)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Decide(ctx, st, c); d.Effect != kernel.EffectDeny || !slices.Equal(d.Rules, []string{"r7"}) {
		t.Fatalf("the edited rule: %+v", d)
	}
	broken := strings.Replace(src, `"^cmd7( |$)"`, `"^cmd7-only"`, 1)
	if _, err := policy.Load(ctx, "edit.yaml", []byte(broken), opts); err == nil || !strings.Contains(err.Error(), `test "r7"`) {
		t.Fatalf("a rule edit that fails its test loaded: %v", err)
	}
}

// TestSnapshotHotReload: a watcher's reloads use the cache as a start
// does. A new version of the file is loaded in full and tested; going back
// to a version the cache has seen loads it from its snapshot, and decides
// as that version; a broken version is refused, snapshot or not.
func TestSnapshotHotReload(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(makePolicy("1", false))
	opts := policy.Options{Cache: &policy.VerdictCache{Dir: filepath.Join(t.TempDir(), "cache"), Build: "test-build"}}
	w, err := policy.NewWatcher(ctx, policy.WatcherConfig{Path: path, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	st := &kernel.State{Run: 1, Turn: 1}
	c, err := kernel.NewCall("c", specFor("run_command"), json.RawMessage(`{"argv":["make"]}`), st)
	if err != nil {
		t.Fatal(err)
	}
	check := func(rev string, effect kernel.Effect, fromSnapshot bool) {
		t.Helper()
		p := w.Policy()
		if d := w.Decide(ctx, st, c); d.Revision != rev || d.Effect != effect || policy.FromSnapshot(p) != fromSnapshot {
			t.Fatalf("decision %+v (from the snapshot: %t), want revision %s, %s, from the snapshot: %t", d, policy.FromSnapshot(p), rev, effect, fromSnapshot)
		}
	}
	check("1", kernel.EffectAllow, false)
	write(makePolicy("2", true))
	if err := w.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if v := w.Policy().TestVerdict(); v.Cached {
		t.Fatalf("a new version: %+v", v)
	}
	check("2", kernel.EffectDeny, false)
	write(makePolicy("1", false))
	if err := w.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	check("1", kernel.EffectAllow, true)
	write(brokenPolicy)
	if err := w.Reload(ctx); err == nil {
		t.Fatal("a broken file reloaded")
	}
	check("1", kernel.EffectAllow, true)
}
