package treetest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The worked example of docs/architecture.md, "Adding a field policy and
// hooks can see": run.last_tool, the tool of the run's last finished call.
// Each edit is the one the docs describe, anchored on the line it follows.

// exampleGoEdits are the three Go files the docs name.
var exampleGoEdits = []struct{ file, old, new string }{
	{"kernel/state.go", "\tRunCalls []CallOutcome\n", "\tRunCalls []CallOutcome\n\t// LastTool is the tool of the run's last finished call.\n\tLastTool string\n"},
	{"kernel/state.go", "\tst.RunCalls = st.RunCalls[:0]\n", "\tst.RunCalls = st.RunCalls[:0]\n\tst.LastTool = \"\"\n"},
	{"kernel/state.go", "\tst.RunCalls = append(st.RunCalls, CallOutcome{Tool: tool, Outcome: o})\n", "\tst.RunCalls = append(st.RunCalls, CallOutcome{Tool: tool, Outcome: o})\n\tst.LastTool = tool\n"},
	{"policy/env.go", "\tCalls []CallOutcome `expr:\"calls\"`\n", "\tCalls []CallOutcome `expr:\"calls\"`\n\tLastTool string `expr:\"last_tool\"`\n"},
	{"policy/env.go", "Tools: tools, Calls: calls,", "Tools: tools, Calls: calls, LastTool: st.LastTool,"},
	{"policy/env.go", "\"calls\": v(&st.RunCalls),", "\"calls\": v(&st.RunCalls), \"last_tool\": v(&st.LastTool),"},
	{"hooks/match.go", "\tTurn    int    `expr:\"turn\"`\n", "\tTurn    int    `expr:\"turn\"`\n\tLastTool string `expr:\"last_tool\"`\n"},
	{"hooks/match.go", "\t\tst := c.State()\n", "\t\tst := c.State()\n\t\te.LastTool = st.LastTool\n"},
}

// exampleDocRows are the rows the docs ask for, each after the row of the
// field before it in the struct.
var exampleDocRows = []struct{ file, after, row string }{
	{"docs/policy.md", "| `run.calls` | list of", "| `run.last_tool` | string | The tool of the run's last finished call; `\"\"` before the first. |"},
	{"docs/policy.md", "| `run.calls` | `[]` |", "| `run.last_tool` | `\"\"` | |"},
	{"docs/hooks.md", "| `turn` | int |", "| `last_tool` | string | the tool of the run's last finished call |"},
}

// The example's own tests, written into the scratch tree: policy reads
// the field in a rule and sets it in a test input, hooks match on it, and
// the live loop sets it.
const (
	examplePolicyTest = `package policy_test

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/policy"
)

func TestExampleLastTool(t *testing.T) {
	src := []byte(` + "`" + `name: last-tool
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: no-write-after-read
    effect: ask
    tools: [write_file]
    when: run.last_tool == "read_file"
tests:
  - name: a write right after a read asks
    input: {call: {tool: write_file, args: {path: a, content: b}}, run: {last_tool: read_file}}
    expect: {decision: ask, rules: [no-write-after-read]}
  - name: a write after a listing does not
    input: {call: {tool: write_file, args: {path: a, content: b}}, run: {last_tool: list_dir}}
    expect: {decision: allow}
` + "`" + `)
	// Loading runs the file's tests and fails if one does.
	if _, err := policy.Load(context.Background(), "last-tool.yaml", src, policy.Options{Tools: policy.BuiltinSpecs()}); err != nil {
		t.Fatal(err)
	}
	validateAgainstSchema(t, src)
}
`
	exampleSchemaCheck = `package policy_test

import (
	"encoding/json"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/schema"
)

// validateAgainstSchema validates a policy file against the embedded
// schemas/policy.schema.json, as an editor or a CI check would.
func validateAgainstSchema(t *testing.T, src []byte) {
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.Embedded("policy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateJSON(b); err != nil {
		t.Fatalf("the policy does not match schemas/policy.schema.json: %v", err)
	}
}
`
	exampleHooksTest = `package hooks

import (
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
)

func TestExampleLastTool(t *testing.T) {
	m, err := NewMatcher(` + "`" + `last_tool == "read_file"` + "`" + `)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kernel.NewCall("c1", kernel.ToolSpec{Name: "write_file", Tier: kernel.TierSideEffecting}, []byte("{}"), &kernel.State{LastTool: "read_file"})
	if err != nil {
		t.Fatal(err)
	}
	env := envFor(c, PhaseBefore, nil, nil)
	defer releaseEnv(env)
	if ok, err := m.Match(env); !ok || err != nil {
		t.Fatalf("match: %v, %v", ok, err)
	}
}
`
	exampleKernelTest = `package kernel_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

type lastToolPolicy struct {
	mu   sync.Mutex
	seen []string
}

func (p *lastToolPolicy) Surface(_ context.Context, _ *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	return tools
}

func (p *lastToolPolicy) Decide(_ context.Context, st *kernel.State, _ *kernel.Call) kernel.Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, st.LastTool)
	return kernel.Decision{Effect: kernel.EffectAllow}
}

func (p *lastToolPolicy) Budget(context.Context, *kernel.State, kernel.BudgetPhase) kernel.BudgetVerdict {
	return kernel.BudgetVerdict{}
}

func TestExampleLastTool(t *testing.T) {
	tools := kernel.NewRegistry()
	for _, name := range []string{"first", "second"} {
		if err := tools.Register(kerneltest.EchoTool(name)); err != nil {
			t.Fatal(err)
		}
	}
	pol := &lastToolPolicy{}
	store := memory.New()
	k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(
		kerneltest.Calls("first", map[string]any{"text": "x"}),
		kerneltest.Calls("second", map[string]any{"text": "y"}),
		kerneltest.Text("done"),
	), Store: store, Tools: tools, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "go")
	if err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatal(res, err)
	}
	if len(pol.seen) != 2 || pol.seen[0] != "" || pol.seen[1] != "first" {
		t.Fatalf("policy saw last_tool %q, want [\"\" first]", pol.seen)
	}
	sess, err := store.Load(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kernel.WalkState(sess, 0, nil)
	if err != nil || st.LastTool != "second" {
		t.Fatalf("WalkState: last tool %q, %v", st.LastTool, err)
	}
}
`
)

// TestAddingAnEnvField applies the worked example of docs/architecture.md
// to a scratch copy of the tree and holds the docs to what it takes: the
// three Go files it names; then the drift tests fail, naming `make
// generate` and the docs tables; after `make generate` and the documented
// rows they pass, the example's policy (a rule on run.last_tool and a test
// that sets it, valid against schemas/policy.schema.json), hook matcher
// and live run work, and the tree differs from the checkout in exactly the
// three Go files, the generated schema and the two docs.
func TestAddingAnEnvField(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kernel, policy and hooks packages in a scratch copy of the tree")
	}
	t.Parallel()
	src := root(t)
	dir := scratch(t)
	doc, err := os.ReadFile(filepath.Join(src, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := string(doc)
	for _, e := range exampleGoEdits {
		if !strings.Contains(steps, "`"+e.file+"`") {
			t.Errorf("docs/architecture.md's worked example does not name %s", e.file)
		}
		edit(t, dir, e.file, e.old, e.new)
	}

	// The Go code alone: it builds, and the drift tests say what is left.
	drift := []string{"-count=1", "-run", "^(TestGenerated|TestDocs)", "./policy/", "./hooks/", "./schemas/"}
	out, err := run(t, dir, false, "go", append([]string{"test"}, drift...)...)
	if err == nil {
		t.Fatalf("the drift tests pass before make generate and the docs:\n%s", out)
	}
	for _, want := range []string{
		"schemas/policy.schema.json is out of date", "run `make generate`", // policy's TestGeneratedInputSchema
		"docs/policy.md, \"The environment\"", "docs/policy.md, \"Tests\"", // policy's TestDocs*
		"docs/hooks.md, \"Matchers: the environment\"", // hooks' TestDocsEnvTable
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the failing drift tests do not say %q:\n%s", want, out)
		}
	}

	run(t, dir, true, "make", "generate")
	for _, r := range exampleDocRows {
		data, err := os.ReadFile(filepath.Join(dir, r.file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		i := strings.Index(text, "\n"+r.after)
		if i < 0 || strings.Count(text, "\n"+r.after) != 1 {
			t.Fatalf("%s has no single row starting %q: the tree changed under this test, update the test (and the docs it follows) with it", r.file, r.after)
		}
		i += 1 + strings.IndexByte(text[i+1:], '\n') + 1
		writeFile(t, dir, r.file, text[:i]+r.row+"\n"+text[i:])
	}
	changed := changedFiles(t, src, dir)
	want := []string{"docs/hooks.md", "docs/policy.md", "hooks/match.go", "kernel/state.go", "policy/env.go", "schemas/policy.schema.json"}
	if !slices.Equal(changed, want) {
		t.Errorf("the example changed %v, want %v", changed, want)
	}

	writeFile(t, dir, "policy/zz_example_test.go", examplePolicyTest)
	writeFile(t, dir, "policy/zz_example_schema_test.go", exampleSchemaCheck)
	writeFile(t, dir, "hooks/zz_example_test.go", exampleHooksTest)
	writeFile(t, dir, "kernel/zz_example_test.go", exampleKernelTest)
	out, _ = run(t, dir, true, "go", "test", "-count=1", "-v", "-run", "^(TestGenerated|TestDocs|TestExampleLastTool|TestSchemaAgreesWithLoader|TestWalkStateIsTheLiveState)",
		"./kernel/", "./policy/", "./hooks/", "./schemas/")
	if n := strings.Count(out, "--- PASS: TestExampleLastTool "); n != 3 {
		t.Errorf("%d of the example's 3 tests (kernel, policy, hooks) passed:\n%s", n, out)
	}
}

// changedFiles lists the files of the scratch tree whose bytes differ from
// the checkout's, relative and sorted (files only one side has count).
func changedFiles(t *testing.T, src, dir string) []string {
	t.Helper()
	var changed []string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		a, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil || !bytes.Equal(a, b) {
			changed = append(changed, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(changed)
	return changed
}
