package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// genPolicy writes a policy with n rules: 5 that apply to every tool and
// the rest spread over n/5 tools (tool0 ... and run_command), five kinds of
// condition in turn. With tests, every rule gets a test that makes it match
// (so the file loads). unindexed makes every rule apply to run_command.
func genPolicy(n int, tests, unindexed bool) string {
	var b strings.Builder
	b.WriteString("name: bench\nrevision: \"1\"\ndefaults: {tool_call: allow}\n")
	b.WriteString("vars:\n  is_write: tool.name in [\"write_file\", \"edit_file\"]\n")
	b.WriteString("rules:\n")
	var t strings.Builder
	tools := max(n/5, 1)
	for i := range n {
		tool := fmt.Sprintf("tool%d", i%tools)
		if i%tools == 0 || unindexed {
			tool = "run_command"
		}
		global := i < 5 && !unindexed
		fmt.Fprintf(&b, "  - id: r%d\n", i)
		var when, arg string
		effect := "deny"
		switch i % 5 {
		case 0:
			when, arg = fmt.Sprintf("call.command matches `\\bbad%d\\b`", i), fmt.Sprintf(`{argv: [bad%d]}`, i)
		case 1:
			effect = "ask"
			when, arg = fmt.Sprintf(`any(call.paths, {# startsWith "dir%d/"})`, i), fmt.Sprintf(`{path: dir%d/x}`, i)
		case 2:
			when, arg = fmt.Sprintf(`call.args.n == %d`, i), fmt.Sprintf(`{n: %d}`, i)
		case 3:
			when, arg = fmt.Sprintf(`len(call.argv) > 1 && call.argv[1] == "x%d"`, i), fmt.Sprintf(`{argv: [a, x%d]}`, i)
		case 4:
			effect = "allow"
			when, arg = fmt.Sprintf(`call.args.mode == "m%d" && turn.round < 50`, i), fmt.Sprintf(`{mode: m%d}`, i)
		}
		fmt.Fprintf(&b, "    effect: %s\n", effect)
		if !global {
			fmt.Fprintf(&b, "    tools: [%s]\n", tool)
		}
		fmt.Fprintf(&b, "    when: >-\n      %s\n", when)
		fmt.Fprintf(&b, "    message: '\"rule %d\"'\n", i)
		if tests {
			fmt.Fprintf(&t, "  - name: r%d matches\n    input: {call: {tool: %s, args: %s}}\n    expect: {decision: %s, rules: [r%d]}\n", i, tool, arg, effect, i)
		}
	}
	if tests {
		b.WriteString("tests:\n")
		b.WriteString(t.String())
	}
	return b.String()
}

func benchDecide(b *testing.B, n int, unindexed bool) {
	p, err := policy.Compile(context.Background(), "bench.yaml", []byte(genPolicy(n, false, unindexed)), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	spec := policy.BuiltinSpecs()[5] // run_command
	st := &kernel.State{SessionID: "s", Run: 1, Turn: 3, Prompt: "fix the build", ToolCounts: map[string]int{"read_file": 4},
		RunCalls: []kernel.CallOutcome{{Tool: "read_file", Outcome: kernel.OutcomeOK}, {Tool: "search", Outcome: kernel.OutcomeOK}}}
	args, _ := json.Marshal(map[string]any{"argv": []string{"go", "test", "./..."}})
	c, err := kernel.NewCall("c1", spec, args, st)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if d := p.Decide(ctx, st, c); d.Effect != kernel.EffectAllow || !d.Default {
		b.Fatalf("decision = %+v", d)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.Decide(ctx, st, c)
	}
}

// BenchmarkDecide decides on a run_command call that no rule matches, so
// every rule that applies to run_command is evaluated (the worst case for
// a decision). Targets: 30 rules under 20µs, 300 rules under 40µs.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{30, 300} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) { benchDecide(b, n, false) })
	}
	// Without the index's help: every rule applies to the tool.
	b.Run("rules=30/all-apply", func(b *testing.B) { benchDecide(b, 30, true) })
}

// BenchmarkSurface chooses the surface over 100 tools with three select
// rules and five drop rules.
func BenchmarkSurface(b *testing.B) {
	src := `name: bench
revision: "1"
defaults: {tool_call: allow}
surfaces:
  sets:
    reads: ["read_*", "search", "git.*"]
    all: ["*"]
    none: []
  default: all
  select:
    - id: done
      when: count(turn.calls, {.outcome == "ok"}) >= 20
      surface: none
    - id: question
      when: not (turn.prompt matches "(?i)fix|change")
      surface: reads
    - id: late
      when: turn.round > 30
      surface: reads
  drop:
`
	for i := range 5 {
		src += fmt.Sprintf("    - id: d%d\n      tools: [\"tool%d*\"]\n      when: session.tool_calls[tool.name] > %d\n", i, i, i+10)
	}
	p, err := policy.Compile(context.Background(), "bench.yaml", []byte(src), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var tools []kernel.ToolSpec
	for i := range 100 {
		tools = append(tools, kernel.ToolSpec{Name: fmt.Sprintf("tool%d", i), Tier: kernel.TierReadOnly})
	}
	st := &kernel.State{Run: 1, Turn: 2, Prompt: "please fix the loop", ToolCounts: map[string]int{"tool1": 3}}
	ctx := context.Background()
	if got := len(p.Surface(ctx, st, tools)); got != 100 {
		b.Fatalf("offered %d tools", got)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.Surface(ctx, st, tools)
	}
}

// BenchmarkLoad parses, compiles, lints and tests a 100-rule file with a
// test per rule. Target: under 50ms.
func BenchmarkLoad(b *testing.B) {
	src := []byte(genPolicy(100, true, false))
	if _, err := policy.Load(context.Background(), "bench.yaml", src, policy.Options{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := policy.Load(context.Background(), "bench.yaml", src, policy.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// genLoadPolicy writes a policy of n rules, each with a test that makes it
// match, the way a large deployment's generated policy looks: rules over
// one or a few tools each (tools: lists, tool.name conditions, or no tools
// at all), when-expressions over call arguments, paths, argv, the tool's
// tier, session counters and labels, and a var. One rule in 10 applies to
// every tool with a ticket number in the arguments, one in 20 to every tool
// with a path prefix, one in 200 to every tool with a regular expression on
// the command (which no index splits: every test evaluates these), and one
// in 20 is an unconditional deny of a tool of its own. Every rule is
// reachable and tested, so the file loads.
func genLoadPolicy(n int) string {
	var b, t strings.Builder
	b.WriteString("name: load\nrevision: \"1\"\ndefaults: {tool_call: allow}\n")
	b.WriteString("vars:\n  program: 'len(call.argv) > 0 ? call.argv[0] : \"\"'\n")
	b.WriteString("rules:\n")
	tools := max(n/10, 1)
	for i := range n {
		tool := fmt.Sprintf("svc%d.op", i%tools)
		var when, in, tools string
		effect := []string{"deny", "ask", "allow"}[i%3]
		switch i % 20 {
		case 0:
			tool = fmt.Sprintf("blocked%d", i)
			effect, tools = "deny", fmt.Sprintf("[%s]", tool)
			in = "{}"
		case 1, 11:
			tools = fmt.Sprintf("[%s]", tool)
			when, in = fmt.Sprintf("call.command matches `\\bbad%d\\b`", i), fmt.Sprintf(`{argv: [x, bad%d]}`, i)
		case 2, 12:
			when, in = fmt.Sprintf(`tool.name == %q && any(call.paths, {# startsWith "dir%d/"})`, tool, i), fmt.Sprintf(`{path: dir%d/x}`, i)
		case 3, 13:
			tools = fmt.Sprintf("[%s, other%d]", tool, i)
			when, in = fmt.Sprintf(`call.args.n == %d && session.tool_calls[tool.name] < 100`, i), fmt.Sprintf(`{n: %d}`, i)
		case 4, 14:
			when, in = fmt.Sprintf(`tool.name in [%q, "aux%d"] && v.program == "p%d"`, tool, i, i), fmt.Sprintf(`{argv: [p%d]}`, i)
		case 5, 15:
			tools = fmt.Sprintf("[%s]", tool)
			when, in = fmt.Sprintf(`call.args.mode == "m%d" && tool.tier != "privileged"`, i), fmt.Sprintf(`{mode: m%d}`, i)
		case 6, 16:
			tools = fmt.Sprintf("[%s]", tool)
			when, in = fmt.Sprintf(`session.labels.team == "t%d" && call.args.mode == "x"`, i), `{mode: x}`
		case 7, 17:
			when, in = fmt.Sprintf(`call.tool == %q && len(call.argv) > 1 && call.argv[1] == "x%d"`, tool, i), fmt.Sprintf(`{argv: [a, x%d]}`, i)
		case 8, 18:
			// Every tool: a ticket number in the arguments.
			when, in = fmt.Sprintf(`call.args.ticket == "T-%d" && session.turns < 500`, i), fmt.Sprintf(`{ticket: T-%d}`, i)
		case 9:
			// Every tool: a path prefix.
			when, in = fmt.Sprintf(`any(call.paths, {# startsWith "g%d/"})`, i), fmt.Sprintf(`{path: g%d/x}`, i)
		case 19:
			if i%200 != 19 {
				tools = fmt.Sprintf("[%s]", tool)
				when, in = fmt.Sprintf(`call.args.k == "k%d"`, i), fmt.Sprintf(`{k: k%d}`, i)
				break
			}
			// Every tool, a condition no index splits.
			when, in = fmt.Sprintf(`call.command matches "^tool%d( |$)"`, i), fmt.Sprintf(`{argv: [tool%d, x]}`, i)
		default:
			tools = fmt.Sprintf("[%s]", tool)
			when, in = fmt.Sprintf(`call.args.k == "k%d"`, i), fmt.Sprintf(`{k: k%d}`, i)
		}
		fmt.Fprintf(&b, "  - id: r%d\n    effect: %s\n", i, effect)
		if tools != "" {
			fmt.Fprintf(&b, "    tools: %s\n", tools)
		}
		if when != "" {
			fmt.Fprintf(&b, "    when: >-\n      %s\n", when)
		}
		fmt.Fprintf(&b, "    message: '\"rule %d\"'\n", i)
		session := ""
		if i%20 == 6 || i%20 == 16 {
			session = fmt.Sprintf("session: {labels: {team: t%d}}, ", i)
		}
		fmt.Fprintf(&t, "  - name: r%d matches\n    input: {%scall: {tool: %s, args: %s}}\n    expect: {decision: %s, rules: [r%d]}\n", i, session, tool, in, effect, i)
	}
	b.WriteString("tests:\n")
	b.WriteString(t.String())
	return b.String()
}

// BenchmarkLoadRules loads (parses, compiles, lints, runs the tests of and
// checks the coverage of) generated policies of 100, 1,000 and 10,000
// rules with a test each. Target: 10,000 rules in under 2s.
func BenchmarkLoadRules(b *testing.B) {
	for _, n := range []int{100, 1000, 2000, 10000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			src := []byte(genLoadPolicy(n))
			b.ReportAllocs()
			cpu0 := testutil.CPUTime()
			for b.Loop() {
				if _, err := policy.Load(context.Background(), "load.yaml", src, policy.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time per load (GC included): on a shared,
			// loaded machine it says more than the wall time.
			b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// genShape writes a policy of n rules of one shape, for every tool, each
// with a test that makes it match: "regex" is one regular expression
// anchored on a literal prefix per command (call.command matches
// "^cmdN( |$)", what a team generates from an inventory), "equality" one
// argument value per rule (call.args.ticket == "T-N"), "mixed" the mix of
// genLoadPolicy.
func genShape(shape string, n int) string {
	if shape == "mixed" {
		return genLoadPolicy(n)
	}
	var b, t strings.Builder
	b.WriteString("name: shape\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n")
	for i := range n {
		when, args := fmt.Sprintf(`call.command matches "^cmd%d( |$)"`, i), fmt.Sprintf("{argv: [cmd%d, x]}", i)
		if shape == "equality" {
			when, args = fmt.Sprintf(`call.args.ticket == "T-%d"`, i), fmt.Sprintf("{ticket: T-%d}", i)
		}
		fmt.Fprintf(&b, "  - id: r%d\n    effect: deny\n    when: '%s'\n", i, when)
		fmt.Fprintf(&t, "  - name: r%d\n    input: {call: {tool: run_command, args: %s}}\n    expect: {decision: deny, rules: [r%d]}\n", i, args, i)
	}
	return b.String() + "tests:\n" + t.String()
}

var shapes = []string{"regex", "equality", "mixed"}

// BenchmarkLoadShapes loads policies of 100, 1,000 and 10,000 rules of
// each shape with a test per rule: uncached (parse, compile, lint and run
// every test, the first load of a file) and cached (the test cache
// vouches for the file: parse, compile and lint only, every later start).
func BenchmarkLoadShapes(b *testing.B) {
	for _, shape := range shapes {
		for _, n := range []int{100, 1000, 10000} {
			src := []byte(genShape(shape, n))
			for _, cached := range []bool{false, true} {
				name := fmt.Sprintf("%s/rules=%d/uncached", shape, n)
				opts := policy.Options{}
				if cached {
					name = fmt.Sprintf("%s/rules=%d/cached", shape, n)
					opts.Cache = &policy.VerdictCache{Dir: filepath.Join(b.TempDir(), "cache"), Build: "bench"}
				}
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					if _, err := policy.Load(ctx, "shape.yaml", src, opts); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					cpu0 := testutil.CPUTime()
					for b.Loop() {
						p, err := policy.Load(ctx, "shape.yaml", src, opts)
						if err != nil || p.TestVerdict().Cached != cached {
							b.Fatalf("%v (verdict %+v)", err, p.TestVerdict())
						}
					}
					b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// BenchmarkDecideShapes decides, in a running kernel, on a call that one
// rule of the middle of the file matches, for policies of 100, 1,000 and
// 10,000 rules of each shape: the index keeps the cost near that of the
// few rules that can match. The snapshot variants decide with the policy
// a cached start loads from the test cache's snapshot, whose rules
// compile on first use: after that first decision, as fast.
func BenchmarkDecideShapes(b *testing.B) {
	for _, from := range []string{"", "-snapshot"} {
		for _, shape := range shapes {
			for _, n := range []int{100, 1000, 10000} {
				b.Run(fmt.Sprintf("%s%s/rules=%d", shape, from, n), func(b *testing.B) {
					benchDecideShape(b, shape, n, from != "")
				})
			}
		}
	}
}

func benchDecideShape(b *testing.B, shape string, n int, fromSnapshot bool) {
	ctx := context.Background()
	src := []byte(genShape(shape, n))
	p, err := policy.Compile(ctx, "shape.yaml", src, policy.Options{})
	if fromSnapshot {
		opts := policy.Options{Cache: &policy.VerdictCache{Dir: filepath.Join(b.TempDir(), "cache"), Build: "bench"}}
		if _, err = policy.Load(ctx, "shape.yaml", src, opts); err == nil {
			p, err = policy.Load(ctx, "shape.yaml", src, opts)
		}
		if err == nil && !policy.FromSnapshot(p) {
			b.Fatal("not loaded from the snapshot")
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	i := n / 2
	args := fmt.Sprintf(`{"argv":["cmd%d","x"]}`, i)
	spec := policy.BuiltinSpecs()[5] // run_command
	switch shape {
	case "equality":
		args = fmt.Sprintf(`{"ticket":"T-%d"}`, i)
	case "mixed":
		i -= i % 20
		i += 8 // a ticket rule, for every tool
		args = fmt.Sprintf(`{"ticket":"T-%d"}`, i)
	}
	st := &kernel.State{SessionID: "s", Run: 1, Turn: 1, ToolCounts: map[string]int{}}
	c, err := kernel.NewCall("c1", spec, []byte(args), st)
	if err != nil {
		b.Fatal(err)
	}
	want := fmt.Sprintf("r%d", i)
	if d := p.Decide(ctx, st, c); len(d.Rules) != 1 || d.Rules[0] != want {
		b.Fatalf("decision = %+v, want rule %s", d, want)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Decide(ctx, st, c)
	}
}

// BenchmarkDiff re-decides 200 recorded sessions of 50 calls each (and
// their surfaces) under two versions of a 10,000-rule generated policy,
// reporting decisions per second (two per call: one per file).
func BenchmarkDiff(b *testing.B) {
	ctx := context.Background()
	old, err := policy.Compile(ctx, "old.yaml", []byte(genShape("regex", 10000)), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	newSrc := strings.Replace(genShape("regex", 10000), `"^cmd7( |$)"`, `"^cmd7( |$|-)"`, 1)
	newP, err := policy.Compile(ctx, "new.yaml", []byte(newSrc), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var sessions []*kernel.Session
	calls := 0
	for s := range 200 {
		sess := &kernel.Session{Meta: kernel.SessionMeta{ID: fmt.Sprintf("s%d", s)}}
		add := func(m kernel.Message) {
			m.Seq = uint64(len(sess.Messages) + 1)
			sess.Messages = append(sess.Messages, m)
		}
		add(kernel.Message{Role: kernel.RoleUser, Content: "fix it"})
		for c := range 50 {
			id := fmt.Sprintf("c%d", c)
			add(kernel.Message{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: id, Name: "run_command",
				Arguments: fmt.Sprintf(`{"argv":["cmd%d","x"]}`, (s*50+c)%12000)}}})
			add(kernel.Message{Role: kernel.RoleTool, ToolCallID: id, ToolName: "run_command", Content: "ok"})
			calls++
		}
		sessions = append(sessions, sess)
	}
	b.ReportAllocs()
	for b.Loop() {
		d := policy.NewDiff(old, newP, policy.DiffOptions{Tools: policy.BuiltinSpecs()})
		for _, s := range sessions {
			if err := d.Add(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
		if rep := d.Report(); rep.Calls != calls {
			b.Fatalf("%d calls re-decided, want %d", rep.Calls, calls)
		}
	}
	b.ReportMetric(float64(2*calls*b.N)/b.Elapsed().Seconds(), "decisions/s")
}
