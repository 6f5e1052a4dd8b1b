package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/expr-lang/expr/vm"
	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
)

// The load's indexes (ruleindex.go, shadowed in analyze.go) must find
// exactly what comparing everything with everything finds. These tests
// build many small random policies that mix every shape the indexes treat
// differently and compare with straightforward reference implementations.

var (
	randTools = []string{"", "[a]", "[a, b]", `["g*"]`, "[c]", "[read_file]", `[a, "g*"]`}
	randWhens = []string{
		"",
		`tool.name == "a"`,
		`tool.name in ["a", "b"]`,
		`tool.name == "zzz"`,
		`false`,
		`call.args.k == "v1"`,
		`call.args.k == "v2" && call.args.n == 1`,
		`tool.name == "b" && call.args.n == 2`,
		`tool.name in ["a", "g1"] && call.args.k == "v1" && call.args.n > 0`,
		`call.args.x.y == 1`,
		`call.args.k == "v1" && call.args.x.y == 1`,
		`call.args.x.y == 1 && call.args.k == "v1"`,
		`session.labels.team == "t1"`,
		`"t1" == session.labels.team && call.args.k == "v2"`,
		`call.args.n == 1.0`,
		`call.args.flag == true`,
		`call.args.k == 5`,
		`any(call.paths, {# startsWith "p"})`,
		`any(call.paths, {# startsWith "p/"})`,
		`any(call.paths, {# startsWith "q"}) && call.args.k == "v1"`,
		`tool.name == "a" && any(call.paths, {# startsWith ""})`,
		`call.command startsWith "rm"`,
		`call.command startsWith "rm -rf" && call.args.k == "v2"`,
		`any(call.paths, {# startsWith "p"}) || call.args.k == "v1"`,
		`tool.tier == "read_only" && call.args.k == "v2"`,
		`call.args.k != "v1"`,
		`call.args.n == 1 || call.args.k == "v1"`,
		`len(call.argv) > 0 && call.argv[0] == "rm"`,
		`call.args.k == "v1" && int(call.args.k) > 0`,
		`int(call.args.k) > 0 && call.args.k == "v1"`,
		`call.args.x.y > 0 && call.args.k == "v2"`,
		`call.command matches "^rm( |$)"`,
		`call.command matches "^rm -rf" && call.args.k == "v2"`,
		`call.command matches "(?i)^RM"`,
		`call.command matches "(?m)^-rf"`,
		`call.command matches "^(rm|ls)"`,
		`call.command matches "rm"`,
		`call.command matches "\\Arm\\b"`,
		`call.args.k in ["v1", "v2"]`,
		`call.args.k in ["v1", ""]`,
		`call.args.n in ["1"] || call.args.k == "v1"`,
		`tool.tier in ["read_only", "privileged"] && call.args.k == "v1"`,
		`session.labels.team in ["t1"] && call.args.n == 1`,
		`call.args.k startsWith "v"`,
		`call.args.k matches "^v1$"`,
		`call.args.x.y startsWith "1"`,
		`tool.name startsWith "g" && call.args.k == "v1"`,
		`tool.source startsWith "built"`,
	}
	randArgs = []string{"{}", "{k: v1}", "{k: v2, n: 1}", "{n: 2}", "{x: {y: 1}}", "{x: s}", "{k: 5}", "{n: 1.0}",
		"{flag: true}", "{path: p/x}", "{k: v1, x: {y: 1}}", "{k: v1, x: s}", "{k: v1, n: 3}", "{argv: [rm, x]}",
		"{argv: [rm, -rf, /]}", "{argv: [\"ls\\n-rf\"]}", "{path: q/z}", "{paths: [p/a, q/b]}", "{path: p}", "{k: v1, path: q}"}
	randCallTools = []string{"a", "b", "c", "g1", "g2", "read_file", "other"}
)

// randPolicy writes a policy of n random rules and n random tests.
func randPolicy(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString("name: rand\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n")
	for i := range n {
		effect := []string{"deny", "ask", "allow"}[rng.IntN(3)]
		fmt.Fprintf(&b, "  - id: r%d\n    effect: %s\n", i, effect)
		if effect != "allow" && rng.IntN(8) == 0 {
			b.WriteString("    mode: dryrun\n")
		}
		if t := randTools[rng.IntN(len(randTools))]; t != "" {
			fmt.Fprintf(&b, "    tools: %s\n", t)
		}
		// Unconditional rules are common, so that deny rules shadow others.
		if w := randWhens[rng.IntN(len(randWhens))]; w != "" && rng.IntN(4) != 0 {
			fmt.Fprintf(&b, "    when: >-\n      %s\n", w)
		}
	}
	b.WriteString("tests:\n")
	for i := range n {
		labels := ""
		if rng.IntN(3) == 0 {
			labels = "session: {labels: {team: t1}}, "
		}
		fmt.Fprintf(&b, "  - name: t%d\n    input: {%scall: {tool: %s, args: %s}}\n    expect: {decision: allow, rules: []}\n",
			i, labels, randCallTools[rng.IntN(len(randCallTools))], randArgs[rng.IntN(len(randArgs))])
	}
	return b.String()
}

func compileForTest(t *testing.T, src string) *Policy {
	t.Helper()
	p, ps, err := compileContext(context.Background(), "rand.yaml", []byte(src), Options{})
	if err != nil || p == nil {
		t.Fatalf("compile: %v", err)
	}
	for _, pr := range ps.list {
		if pr.Stage == StageSyntax || pr.Stage == StageCompile {
			t.Fatalf("%s\n%s", pr, src)
		}
	}
	return p
}

// TestShadowedMatchesPairwise compares the indexed unreachable-rule lint
// with the pairwise check it replaced.
func TestShadowedMatchesPairwise(t *testing.T) {
	shadowing := func(d *rule) bool {
		return !d.dryrun && d.effect == kernel.EffectDeny && d.unconditional() && !(d.when != nil && d.scope.names != nil && len(d.scope.names) == 0)
	}
	shadowable := func(r *rule) bool { return !r.dryrun && r.effect != kernel.EffectDeny }
	found := 0
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 17))
		src := randPolicy(rng, 40)
		p := compileForTest(t, src)
		var want []shadowPair
		for _, d := range p.rules {
			if !shadowing(d) {
				continue
			}
			for _, r := range p.rules {
				if shadowable(r) && covers(d, r) {
					want = append(want, shadowPair{d, r})
				}
			}
		}
		got := shadowed(p.rules, shadowing, shadowable)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: indexed found %s, pairwise %s\n%s", seed, pairIDs(got), pairIDs(want), src)
		}
		found += len(want)
	}
	t.Logf("found %d", found)
	if found < 100 {
		t.Fatalf("the random policies shadow only %d rules: the comparison proves little", found)
	}
}

func pairIDs(ps []shadowPair) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.d.id+">"+p.r.id)
	}
	return strings.Join(out, " ")
}

// TestIndexedTestsMatchReference compares the tests' report (every
// failure message, which records the decision and the rules that matched,
// and the coverage lint) with the one evaluating every rule that applies
// to each test's tool, and the tool index with a scan of every rule.
func TestIndexedTestsMatchReference(t *testing.T) {
	var candidates, applicable int
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 42))
		src := randPolicy(rng, 40)
		p := compileForTest(t, src)
		got, err := p.runTests(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.runTests(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(withoutCount(got), withoutCount(want)) {
			for i := range got.Results {
				if !reflect.DeepEqual(got.Results[i], want.Results[i]) {
					t.Errorf("seed %d: test %s: indexed %q, reference %q", seed, got.Results[i].Name, got.Results[i].Failures, want.Results[i].Failures)
				}
			}
			t.Fatalf("seed %d: reports differ (untested: indexed %d, reference %d)\n%s", seed, len(got.Untested), len(want.Untested), src)
		}
		// How much the guards saved, so the comparison is not vacuous.
		candidates += got.Evaluated
		applicable += want.Evaluated
		for i := range p.tests {
			name := p.tests[i].Input.Call.Tool
			var scan []*rule
			for _, r := range p.rules {
				if r.appliesTo(name) {
					scan = append(scan, r)
				}
			}
			if idx := p.rulesFor(name); !slices.Equal(idx, scan) {
				t.Fatalf("seed %d: rulesFor(%s) = %v, scan %v", seed, name, ids(idx), ids(scan))
			}
		}
	}
	t.Logf("candidates %d of %d", candidates, applicable)
	if candidates*10 > applicable*8 {
		t.Fatalf("the guards kept %d of %d applicable rules: the comparison proves little", candidates, applicable)
	}
}

// withoutCount is a report without its evaluation count, which the index
// changes (that is its point).
func withoutCount(r *TestReport) TestReport {
	c := *r
	c.Evaluated = 0
	return c
}

func ids(rs []*rule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.id)
	}
	return out
}

// FuzzIndexedDecision holds a running kernel's decisions, which evaluate
// only the rules the index finds for the call, to the decision evaluating
// every rule that applies to the tool: for random policies mixing every
// shape the index treats differently, on every tool and argument set of
// the tables above, with and without session labels, the effect, rules,
// dry-run rules, default and message are the same.
func FuzzIndexedDecision(f *testing.F) {
	for seed := range uint64(24) {
		f.Add(seed, uint8(40))
	}
	var skipped, applicable int
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		rng := rand.New(rand.NewPCG(seed, 99))
		p := compileForTest(t, randPolicy(rng, int(n%80)+1))
		ctx := context.Background()
		m := new(vm.VM)
		for _, labels := range []map[string]string{nil, {"team": "t1"}} {
			st := &kernel.State{Run: 1, Turn: 1, Labels: labels, ToolCounts: map[string]int{}}
			for _, tool := range randCallTools {
				spec := p.specs.get(tool)
				for _, args := range randArgs {
					var a map[string]any
					if err := yaml.Unmarshal([]byte(args), &a); err != nil {
						t.Fatal(err)
					}
					raw, _ := json.Marshal(a)
					c, err := kernel.NewCall("c1", spec, raw, st)
					if err != nil {
						t.Fatal(err)
					}
					got := p.Decide(ctx, st, c)
					e := p.entry(tool)
					env := new(Env)
					env.fillState(st)
					env.fillCall(c, newExtractor(spec.Schema))
					want := p.decide(m, env, &e.ruleGroups, nil)
					if got.Effect != want.Effect || !slices.Equal(got.Rules, want.Rules) || !slices.Equal(got.WouldDeny, want.WouldDeny) ||
						!slices.Equal(got.WouldAsk, want.WouldAsk) || got.Default != want.Default || got.Message != want.Message {
						t.Fatalf("seed %d: %s %s: indexed %+v, every rule %+v", seed, tool, args, got, want)
					}
					if e.idx != nil {
						applicable += len(e.rules)
						skipped += len(e.rules) - len(e.idx.candidates(p.rindex, m, env, new(probe)))
					}
				}
			}
		}
	})
	f.Logf("the index skipped %d of %d rule evaluations", skipped, applicable)
	if applicable > 0 && skipped*10 < applicable {
		f.Fatalf("the index skipped %d of %d rule evaluations: the comparison proves little", skipped, applicable)
	}
}
