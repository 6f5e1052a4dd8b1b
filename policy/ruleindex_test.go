package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/expr-lang/expr/vm"

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
	}
	randArgs = []string{"{}", "{k: v1}", "{k: v2, n: 1}", "{n: 2}", "{x: {y: 1}}", "{x: s}", "{k: 5}", "{n: 1.0}",
		"{flag: true}", "{path: p/x}", "{k: v1, x: {y: 1}}", "{k: v1, x: s}", "{k: v1, n: 3}", "{argv: [rm, x]}",
		"{argv: [rm, -rf, /]}", "{path: q/z}", "{paths: [p/a, q/b]}", "{path: p}", "{k: v1, path: q}"}
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
		if !reflect.DeepEqual(got, want) {
			for i := range got.Results {
				if !reflect.DeepEqual(got.Results[i], want.Results[i]) {
					t.Errorf("seed %d: test %s: indexed %q, reference %q", seed, got.Results[i].Name, got.Results[i].Failures, want.Results[i].Failures)
				}
			}
			t.Fatalf("seed %d: reports differ (untested: indexed %d, reference %d)\n%s", seed, len(got.Untested), len(want.Untested), src)
		}
		// How much the guards saved, so the comparison is not vacuous.
		x := p.newTestIndex()
		for i := range p.tests {
			in := &p.tests[i].Input
			st := in.state()
			call, err := in.call(p.specs, st)
			if err != nil {
				t.Fatal(err)
			}
			env := new(Env)
			env.fillState(st)
			env.fillCall(call, newExtractor(call.Tool().Schema))
			name := call.Tool().Name
			candidates += len(x.candidates(new(vm.VM), env, name, i+1))
			var scan []*rule
			for _, r := range p.rules {
				if r.appliesTo(name) {
					scan = append(scan, r)
				}
			}
			applicable += len(scan)
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

func ids(rs []*rule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.id)
	}
	return out
}
