package policy

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// compileT compiles a policy without requiring tests.
func compileT(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := Compile(context.Background(), "t.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// decideOn decides on a call of tool with args under st.
func decideOn(t *testing.T, p *Policy, spec kernel.ToolSpec, args string, st *kernel.State) kernel.Decision {
	t.Helper()
	if st == nil {
		st = &kernel.State{Run: 1, Turn: 1, ToolCounts: map[string]int{}}
	}
	c, err := kernel.NewCall("c1", spec, json.RawMessage(args), st)
	if err != nil {
		t.Fatal(err)
	}
	return p.Decide(context.Background(), st, c)
}

func builtin(name string) kernel.ToolSpec { return newSpecSet(nil).get(name) }

const semantics = `
name: semantics
revision: "r1"
defaults: {tool_call: allow}
rules:
  - id: allow-ls
    effect: allow
    tools: [run_command]
    when: call.argv[0] == "ls"
  - id: ask-writes
    effect: ask
    tools: [write_file]
    message: '"write " + call.paths[0] + "?"'
  - id: deny-secrets
    effect: deny
    when: any(call.paths, {# endsWith ".pem"})
    message: '"no keys"'
  - id: deny-secrets-too
    effect: deny
    when: any(call.paths, {# startsWith "keys/"})
  - id: deny-on-error
    effect: deny
    tools: [read_file]
    when: call.args.limit > 10
  - id: ask-on-error
    effect: ask
    tools: [list_dir]
    when: call.args.depth > 2
  - id: allow-on-error
    effect: allow
    tools: [search]
    when: call.args.max > 1
  - id: dry-deny
    effect: deny
    mode: dryrun
    tools: [run_command]
    when: call.command contains "sudo"
  - id: dry-ask
    effect: ask
    mode: dryrun
    tools: [run_command]
    when: call.argv[0] == "ls"
  - id: broken-message
    effect: deny
    tools: [edit_file]
    message: call.args.nothing + "x"
`

func TestDecideSemantics(t *testing.T) {
	p := compileT(t, semantics)
	for _, tc := range []struct {
		name, tool, args string
		effect           kernel.Effect
		rules            []string
		wouldDeny        []string
		wouldAsk         []string
		def              bool
		msg              string // substring
	}{
		{name: "allow rule", tool: "run_command", args: `{"argv":["ls"]}`, effect: "allow", rules: []string{"allow-ls"}, wouldAsk: []string{"dry-ask"}},
		{name: "default", tool: "run_command", args: `{"argv":["pwd"]}`, effect: "allow", def: true, msg: "no rule matched; the default is allow"},
		{name: "ask with message", tool: "write_file", args: `{"path":"a.txt"}`, effect: "ask", rules: []string{"ask-writes"}, msg: "write a.txt?"},
		{name: "deny beats ask", tool: "write_file", args: `{"path":"k.pem"}`, effect: "deny", rules: []string{"deny-secrets"}, msg: "no keys"},
		{name: "every matching deny is listed, first message wins", tool: "write_file", args: `{"path":"keys/k.pem"}`, effect: "deny", rules: []string{"deny-secrets", "deny-secrets-too"}, msg: "no keys"},
		{name: "deny without message", tool: "read_file", args: `{"path":"keys/a","limit":5}`, effect: "deny", rules: []string{"deny-secrets-too"}, msg: "rule deny-secrets-too"},
		{name: "error in deny fails closed", tool: "read_file", args: `{"path":"a","limit":"lots"}`, effect: "deny", rules: []string{"deny-on-error"}, msg: "could not be evaluated, so it applies (fail closed)"},
		{name: "error in ask fails closed", tool: "list_dir", args: `{"path":"a","depth":"deep"}`, effect: "ask", rules: []string{"ask-on-error"}, msg: "fail closed"},
		{name: "error in allow is no match", tool: "search", args: `{"pattern":"x","max":"many"}`, effect: "allow", def: true},
		{name: "dry-run deny does not act", tool: "run_command", args: `{"argv":["sudo","make"]}`, effect: "allow", def: true, wouldDeny: []string{"dry-deny"}},
		{name: "a failing message still decides", tool: "edit_file", args: `{"path":"x"}`, effect: "deny", rules: []string{"broken-message"}, msg: "its message failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideOn(t, p, builtin(tc.tool), tc.args, nil)
			if d.Effect != tc.effect || !slices.Equal(d.Rules, tc.rules) || !slices.Equal(d.WouldDeny, tc.wouldDeny) ||
				!slices.Equal(d.WouldAsk, tc.wouldAsk) || d.Default != tc.def || !strings.Contains(d.Message, tc.msg) {
				t.Fatalf("decision = %+v", d)
			}
			if d.ID == "" || d.Revision != "r1" || d.SHA256 != p.SHA256() || len(d.SHA256) != 64 || d.EvalTime <= 0 {
				t.Fatalf("audit fields = %+v", d)
			}
		})
	}
}

func TestAskAsDeny(t *testing.T) {
	for _, tc := range []struct {
		name, defaults, tool string
		effect               kernel.Effect
		msg                  string
	}{
		{"ask rule with a human", "{tool_call: allow}", "write_file", "ask", "write?"},
		{"ask rule without a human", "{tool_call: allow, ask: deny}", "write_file", "deny", "write? (no approver: defaults.ask is deny)"},
		{"ask default without a human", "{tool_call: ask, ask: deny}", "read_file", "deny", "the default is ask (no approver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compileT(t, `name: n
revision: "1"
defaults: `+tc.defaults+`
rules:
  - id: writes
    effect: ask
    tools: [write_file]
    message: '"write?"'
`)
			d := decideOn(t, p, builtin(tc.tool), `{"path":"a"}`, nil)
			if d.Effect != tc.effect || !strings.Contains(d.Message, tc.msg) {
				t.Fatalf("decision = %+v", d)
			}
		})
	}
}

// TestPathsCannotBeSmuggled is an attack test: a rule on call.paths must
// see the path the tool will use, not a spelling that dodges a prefix
// check. It fails if cleanPath is removed from extraction.
func TestPathsCannotBeSmuggled(t *testing.T) {
	p := compileT(t, `name: n
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: outside-src
    effect: deny
    when: >-
      any(call.paths, {not (# startsWith "src/")})
  - id: env
    effect: deny
    when: '".env" in call.paths'
`)
	for _, path := range []string{"src/../.env", "./src/../../etc/passwd", "src//../Makefile", `src\..\.env`, "src/./../x"} {
		t.Run(path, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"path": path, "content": "x"})
			d := decideOn(t, p, builtin("write_file"), string(args), nil)
			if d.Effect != kernel.EffectDeny {
				t.Fatalf("%q was %s: %+v", path, d.Effect, d)
			}
		})
	}
	d := decideOn(t, p, builtin("write_file"), `{"path":"./src/ok/../a.go"}`, nil)
	if d.Effect != kernel.EffectAllow {
		t.Fatalf("a path inside src was %+v", d)
	}
}

func TestExtraction(t *testing.T) {
	p := compileT(t, `name: n
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: show
    effect: deny
    message: 'join(call.paths, "|") + " / " + call.command'
`)
	for _, tc := range []struct {
		name   string
		schema string
		args   string
		want   string
	}{
		{"convention", `{"type":"object","properties":{"path":{"type":"string"},"argv":{"type":"array"}}}`, `{"path":"a","argv":["x","y z"]}`, "a / x y z"},
		{"annotations", `{"type":"object","properties":{"target":{"type":"string","x-policy":"path"},"files":{"type":"array","x-policy":"paths"},"script":{"type":"string","x-policy":"command"}}}`,
			`{"target":"t","files":["f1","./f2"],"script":"rm -rf /"}`, "f1|f2|t / rm -rf /"},
		{"opt out", `{"type":"object","properties":{"path":{"type":"string","x-policy":"none"},"dest":{"type":"string","x-policy":"path"}}}`, `{"path":"ignored","dest":"d"}`, "d / "},
		{"no schema: convention on the args", ``, `{"paths":["a","b"],"command":"ls -l"}`, "a|b / ls -l"},
		{"argv items that are not strings still show", `{"type":"object","properties":{"argv":{"type":"array"}}}`, `{"argv":["rm",1,true]}`, " / rm 1 true"},
		{"unrelated properties", `{"type":"object","properties":{"text":{"type":"string"}}}`, `{"text":"path"}`, " / "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := kernel.ToolSpec{Name: "custom." + strings.ReplaceAll(tc.name, " ", "_"), Tier: kernel.TierReadOnly, Schema: json.RawMessage(tc.schema)}
			d := decideOn(t, p, spec, tc.args, nil)
			if d.Message != tc.want {
				t.Fatalf("message = %q, want %q", d.Message, tc.want)
			}
		})
	}
}

// TestIndex checks that rules are only evaluated for the tools they can
// apply to, whether that comes from tools: or from tool.name conditions.
func TestIndex(t *testing.T) {
	p := compileT(t, `name: n
revision: "1"
defaults: {tool_call: allow}
vars:
  is_git: tool.name in ["git.status", "git.log"]
rules:
  - id: by-equality
    effect: deny
    when: tool.name == "run_command" && call.command contains "x"
  - id: by-in
    effect: deny
    when: call.tool in ["write_file", "edit_file"] && turn.round > 3
  - id: by-var
    effect: ask
    when: v.is_git && turn.round > 1
  - id: by-or
    effect: deny
    when: tool.name == "read_file" || tool.name == "search"
  - id: by-glob
    effect: deny
    tools: ["git.*"]
    when: tool.name == "git.push" || turn.round > 9
  - id: any-tool
    effect: deny
    when: turn.round > 5 || tool.name == "x"
  - id: negated
    effect: allow
    when: not (tool.name == "run_command")
`)
	ids := func(rs []*rule) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.id)
		}
		return out
	}
	for _, tc := range []struct {
		tool  string
		rules []string
	}{
		{"run_command", []string{"by-equality", "any-tool", "negated"}},
		{"edit_file", []string{"by-in", "any-tool", "negated"}},
		{"git.log", []string{"by-var", "by-glob", "any-tool", "negated"}},
		{"git.push", []string{"by-glob", "any-tool", "negated"}},
		{"search", []string{"by-or", "any-tool", "negated"}},
		{"list_dir", []string{"any-tool", "negated"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			e := p.entry(tc.tool)
			got := ids(slices.Concat(e.dryrun, e.deny, e.ask, e.allow))
			slices.Sort(got)
			want := slices.Clone(tc.rules)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("rules for %s = %v, want %v", tc.tool, got, want)
			}
		})
	}
}

func TestSurfaces(t *testing.T) {
	p := compileT(t, `name: n
revision: "1"
defaults: {tool_call: allow}
surfaces:
  sets:
    reads: [read_file, "git.*"]
    none: []
    all: ["*"]
  default: reads
  select:
    - id: late
      when: turn.round >= 3
      surface: none
    - id: broken
      when: call.argv[0] == "x"
      surface: none
    - id: everything
      when: turn.prompt == "all"
      surface: all
  drop:
    - id: no-git-after-one-call
      tools: ["git.*"]
      when: session.tool_calls[tool.name] >= 1
    - id: broken-drop
      tools: [read_file]
      when: turn.prompt == "boom" && call.argv[0] == "x"
`)
	var tools []kernel.ToolSpec
	for _, n := range []string{"read_file", "search", "write_file", "git.status", "git.log"} {
		tools = append(tools, builtin(n))
	}
	for _, tc := range []struct {
		name   string
		st     kernel.State
		offers string
	}{
		{"default set; a select that errors is no match", kernel.State{Turn: 1}, "read_file,git.status,git.log"},
		{"select by round", kernel.State{Turn: 3}, ""},
		{"glob set", kernel.State{Turn: 1, Prompt: "all"}, "read_file,search,write_file,git.status,git.log"},
		{"drop by count", kernel.State{Turn: 1, Prompt: "all", ToolCounts: map[string]int{"git.status": 2}}, "read_file,search,write_file,git.log"},
		{"a drop rule that errors drops (fail closed)", kernel.State{Turn: 1, Prompt: "boom"}, "git.status,git.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tools)
			out := p.Surface(context.Background(), &tc.st, in)
			var names []string
			for _, s := range out {
				names = append(names, s.Name)
			}
			if got := strings.Join(names, ","); got != tc.offers {
				t.Fatalf("offered %q, want %q", got, tc.offers)
			}
			for i := range in {
				if in[i].Name != tools[i].Name {
					t.Fatal("Surface modified its input")
				}
			}
		})
	}
	none := compileT(t, "name: n\nrevision: \"1\"\ndefaults: {tool_call: allow}\n")
	if out := none.Surface(context.Background(), &kernel.State{}, tools); len(out) != len(tools) {
		t.Fatalf("a policy without surfaces offered %d of %d tools", len(out), len(tools))
	}
}

func TestBudgets(t *testing.T) {
	p := compileT(t, `name: n
revision: "1"
defaults: {tool_call: allow}
budget:
  max_cost: 1.0
  max_time: 90s
budgets:
  - id: cost
    warn_when: session.cost_usd >= budget.max_cost / 2
    stop_when: session.cost_usd >= budget.max_cost
    message: '"spent " + string(session.cost_usd)'
    wrap_up: true
  - id: time
    stop_when: turn.elapsed > budget.max_time
  - id: after-tools-only
    stop_when: turn.phase == "after_tools" && turn.round >= 2
  - id: broken
    warn_when: turn.calls[5].tool == "x"
`)
	t0 := DefaultNow
	for _, tc := range []struct {
		name     string
		st       kernel.State
		phase    kernel.BudgetPhase
		stop     string
		wrapUp   bool
		msg      string
		warnings []string
	}{
		{"quiet", kernel.State{Turn: 1, RunCalls: make([]kernel.CallOutcome, 6)}, kernel.BeforeModel, "", false, "", nil},
		{"warn, and an error warns", kernel.State{Turn: 1, SessionTotals: kernel.Totals{CostUSD: 0.6}}, kernel.BeforeModel, "", false, "", []string{"cost", "broken"}},
		{"stop with wrap-up", kernel.State{Turn: 1, SessionTotals: kernel.Totals{CostUSD: 1.5}, RunCalls: make([]kernel.CallOutcome, 6)}, kernel.BeforeModel, "cost", true, "spent 1.5", []string{"cost"}},
		{"duration constant", kernel.State{Turn: 1, Now: t0, RunStarted: t0.Add(-2 * time90s()), RunCalls: make([]kernel.CallOutcome, 6)}, kernel.BeforeModel, "time", false, "", nil},
		{"phase before model", kernel.State{Turn: 2, RunCalls: make([]kernel.CallOutcome, 6)}, kernel.BeforeModel, "", false, "", nil},
		{"phase after tools", kernel.State{Turn: 2, RunCalls: make([]kernel.CallOutcome, 6)}, kernel.AfterTools, "after-tools-only", false, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := p.Budget(context.Background(), &tc.st, tc.phase)
			stop := ""
			if v.Stop != nil {
				stop = v.Stop.ID
				if v.Stop.WrapUp != tc.wrapUp || !strings.Contains(v.Stop.Message, tc.msg) {
					t.Fatalf("stop = %+v", v.Stop)
				}
			}
			var warned []string
			for _, w := range v.Warnings {
				warned = append(warned, w.ID)
			}
			if stop != tc.stop || !slices.Equal(warned, tc.warnings) {
				t.Fatalf("verdict = stop %q warnings %v, want %q %v", stop, warned, tc.stop, tc.warnings)
			}
		})
	}
}

func time90s() time.Duration { return 90 * time.Second }
