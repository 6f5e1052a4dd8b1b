package policy

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/expr-lang/expr/vm"
)

// fastCorpus are expressions of the shapes the fast path takes, and some
// it must leave to the VM (fast: false).
var fastCorpus = []struct {
	src  string
	fast bool
}{
	{`run.turn > budget.max_turns`, true},
	{`run.turn >= 3 && session.turns < 10`, true},
	{`run.turn == 2 || run.number != 1`, true},
	{`!(run.turn <= 2)`, true},
	{`not (session.cost_usd > 0.5)`, true},
	{`session.cost_usd >= run.cost_usd`, true},
	{`session.tokens + 1 > 5`, false},
	{`run.prompt contains "rm"`, true},
	{`run.prompt startsWith "a" or run.prompt endsWith "z"`, true},
	{`run.phase == "after_tools"`, true},
	{`tool.name == "read_file" && tool.tier != "privileged"`, true},
	{`tool.name < "m"`, true},
	{`call.args.path contains ".env"`, true},
	{`call.args.path startsWith "/etc"`, true},
	{`call.args.limit > 10000`, true},
	{`call.args.limit == 20`, true},
	{`call.args.limit != 2.5`, true},
	{`call.args.limit <= call.args.offset`, true},
	{`call.args.path == call.args.other`, true},
	{`call.args.flag`, true},
	{`call.args.flag == true`, true},
	{`call.args.flag && run.turn > 1`, true},
	{`call.args.path contains call.args.other`, true},
	{`call.args["path"] == "x"`, true},
	{`call.args.nested.x == 1`, false},
	{`call.args?.path == "x"`, false},
	{`v.big`, true},
	{`v.big && call.args.path endsWith ".go"`, true},
	{`any(call.paths, {# startsWith "/etc/"})`, false},
	{`run.elapsed > duration("1m")`, false},
	{`turn.round > 1`, false},
	{`call.args.path in ["a", "b"]`, false},
	{`len(run.tools) > 1`, false},
	{`session.labels.team == "x"`, false},
	{`hooks.before_model.blocked`, true},
}

const fastVars = `vars:
  big: call.args.limit > 100 || run.turn > 5
budget: {max_turns: 3}
`

func compileCorpus(t testing.TB) *Policy {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: fast\nrevision: \"1\"\ndefaults: {tool_call: allow}\n" + fastVars + "rules:\n")
	for i, c := range fastCorpus {
		fmt.Fprintf(&b, "  - id: r%d\n    effect: deny\n    when: '%s'\n", i, c.src)
	}
	p, err := Compile(context.Background(), "fast.yaml", []byte(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// randArg is a random value of the kinds tool arguments hold, and some
// they should not (NaN, an int, nil, nested values).
func randArg(r *rand.Rand) any {
	switch r.IntN(11) {
	case 0:
		return nil
	case 1:
		return float64(r.IntN(30000) - 5)
	case 2:
		return r.NormFloat64() * 100
	case 3:
		return r.IntN(25)
	case 4:
		return r.IntN(2) == 0
	case 5:
		return math.NaN()
	case 6:
		return map[string]any{"x": 1.0}
	case 7:
		return []any{"a"}
	case 8:
		return 20.0
	}
	return [...]string{"", "x", "a", "b", ".env", "/etc/passwd", "src/.env.go", "main.go", "m", "z"}[r.IntN(10)]
}

func randEnv(r *rand.Rand) *Env {
	e := &Env{}
	e.Session.Turns, e.Session.Tokens, e.Session.CostUSD = r.IntN(12), r.IntN(9), float64(r.IntN(4))/4
	e.Run = RunEnv{Number: r.IntN(3), Turn: r.IntN(8), Prompt: [...]string{"", "rm -rf", "abz", "a", "hello"}[r.IntN(5)],
		CostUSD: float64(r.IntN(4)) / 4, Phase: [...]string{"", "before_model", "after_tools"}[r.IntN(3)]}
	e.fillTurn()
	e.Tool = ToolEnv{Name: [...]string{"read_file", "write", "z"}[r.IntN(3)], Tier: [...]string{"read_only", "privileged"}[r.IntN(2)]}
	args := map[string]any{}
	for _, k := range []string{"path", "limit", "offset", "other", "flag", "nested"} {
		if r.IntN(5) > 0 {
			args[k] = randArg(r)
		}
	}
	if r.IntN(10) > 0 {
		e.Call.Args = args
	}
	return e
}

// TestFastPathAgreesWithVM: whenever the fast path answers, its answer is
// the VM's on the same Env, and the VM did not fail; the corpus's fast
// shapes are recognised (and answer most of the time), the others are not.
func TestFastPathAgreesWithVM(t *testing.T) {
	p := compileCorpus(t)
	r := rand.New(rand.NewPCG(45, 1))
	var m vm.VM
	for i, c := range fastCorpus {
		pr := p.rules[i].when
		f := pr.fastPath()
		if (f != nil) != c.fast {
			t.Fatalf("%s: fast path built = %v, want %v", c.src, f != nil, c.fast)
		}
		if f == nil {
			continue
		}
		prog, err := pr.compiled()
		if err != nil {
			t.Fatal(err)
		}
		answered := 0
		const n = 4000
		for range n {
			env := randEnv(r)
			v, ok := f(env)
			out, vmErr := m.Run(prog, env)
			if !ok {
				continue
			}
			answered++
			if v.k != fkBool || vmErr != nil || out != v.b {
				t.Fatalf("%s on args %v run %+v: fast path says %+v, the VM %v (error %v)", c.src, env.Call.Args, env.Run, v, out, vmErr)
			}
			got, err := eval(&m, pr, env)
			if err != nil || got != v.b {
				t.Fatalf("%s: eval gave %v, %v; want %v", c.src, got, err, v.b)
			}
		}
		if answered < n/100 {
			t.Errorf("%s: the fast path answered %d of %d Envs", c.src, answered, n)
		}
	}
}

// TestFastPathFallsBackToTheVM: where the fast path cannot say, eval gives
// the VM's verdict and error (a deny rule on a non-string argument fails
// closed with expr's message).
func TestFastPathFallsBackToTheVM(t *testing.T) {
	p := compileCorpus(t)
	var m vm.VM
	pr := p.rules[12].when // call.args.path contains ".env"
	env := &Env{}
	env.Call.Args = map[string]any{"path": 3.0}
	if _, ok := pr.fastPath()(env); ok {
		t.Fatal("the fast path answered on a number")
	}
	_, err := eval(&m, pr, env)
	if err == nil {
		t.Fatal("eval of contains on a number gave no error")
	}
	env.Call.Args = map[string]any{}
	got, err := eval(&m, pr, env)
	if err != nil || got {
		t.Fatalf("missing path: %v, %v; want false, nil (the VM's nil rule)", got, err)
	}
}

func BenchmarkFastPathEval(b *testing.B) {
	p := compileCorpus(b)
	env := &Env{Run: RunEnv{Turn: 2}}
	env.Call.Args = map[string]any{"path": "main.go", "limit": 20.0}
	var m vm.VM
	for _, i := range []int{0, 12, 14} {
		pr := p.rules[i].when
		prog, _ := pr.compiled()
		b.Run(fastCorpus[i].src+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := eval(&m, pr, env); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fastCorpus[i].src+"/vm", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Run(prog, env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
