package policy

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
)

func loadExcludeExample(t *testing.T, opts Options) *Policy {
	t.Helper()
	p, err := LoadFile(context.Background(), "testdata/memory-exclude.yaml", opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMemoryExcludeExampleTests runs the example's own tests (Load refuses
// a file whose tests fail or leave a rule untested).
func TestMemoryExcludeExampleTests(t *testing.T) {
	p := loadExcludeExample(t, Options{})
	rep, err := p.RunTests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed() || len(rep.Results) != 4 {
		var b bytes.Buffer
		_ = rep.Format(&b, true)
		t.Fatalf("want 4 passing tests:\n%s", b.String())
	}
	if !p.HasExcludeRules() || p.HasExcludeRules() != p.HasMemoryRules() {
		t.Fatal("HasExcludeRules")
	}
}

// readFileCall is a read_file call as the loop builds it: the schema marks
// path as a path argument.
func readFileCall(t *testing.T, path string) *kernel.Call {
	t.Helper()
	spec := kernel.ToolSpec{Name: "read_file", Schema: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)}
	c, err := kernel.NewCall("c1", spec, []byte(`{"path":"`+path+`"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMemoryExclude holds the effect's semantics on the API the kernel
// calls per chunk: call.paths cleaned as for tool rules, chunk fields,
// dry run only reported, exclude rules leave injection alone.
func TestMemoryExclude(t *testing.T) {
	p := loadExcludeExample(t, Options{})
	ctx := context.Background()
	tool := MemoryChunk{Session: "s1", Seq: 2, Role: "tool", Tool: "read_file", Text: "x"}
	for _, tc := range []struct {
		name     string
		ch       MemoryChunk
		call     *kernel.Call
		excluded bool
		would    string
	}{
		{"secret read", tool, readFileCall(t, "secrets/key.txt"), true, ""},
		{"dot-dot into secrets", tool, readFileCall(t, "./notes/../secrets//key.txt"), true, ""},
		{"notes read", tool, readFileCall(t, "notes/a.txt"), false, ""},
		{"secrets-like name", tool, readFileCall(t, "secretsauce.txt"), false, ""},
		{"user words", MemoryChunk{Session: "s1", Seq: 1, Role: "user", Text: "secrets/key.txt"}, nil, false, ""},
		{"dry run", MemoryChunk{Session: "s1", Seq: 4, Role: "tool", Tool: "run_command", Text: "AWS_SECRET=1"}, nil, false, "env-dump-audit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Exclude(ctx, nil, tc.ch, tc.call)
			if d.Excluded != tc.excluded || (tc.excluded && d.Rule != "no-secrets-in-memory") {
				t.Fatalf("excluded %t by %q, want %t", d.Excluded, d.Rule, tc.excluded)
			}
			if got := strings.Join(d.WouldExclude, ","); got != tc.would {
				t.Fatalf("would_exclude %q, want %q", got, tc.would)
			}
		})
	}
	// The memory: section's drop and refuse rulings do not run exclude rules.
	md := p.Memory(ctx, memState(), MemoryRetrieval{Hits: []MemoryHit{{Session: "s1", Seq: 2, Role: "tool", Tool: "read_file", Source: "text"}}})
	if md.Refused || len(md.Kept) != 1 {
		t.Fatalf("an exclude rule acted on injection: %+v", md)
	}
}

// TestMemoryExcludeFailsClosed: a rule that cannot be evaluated excludes.
func TestMemoryExcludeFailsClosed(t *testing.T) {
	p := compileT(t, `
name: m
revision: "1"
defaults: {tool_call: allow}
memory:
  - id: bad
    effect: exclude
    when: int(chunk.text) > 3
`)
	d := p.Exclude(context.Background(), nil, MemoryChunk{Session: "s", Seq: 1, Role: "user", Text: "not a number"}, nil)
	if !d.Excluded || d.Rule != "bad" || !strings.Contains(d.Err, "fail closed") {
		t.Fatalf("a failing exclude rule indexed the chunk: %+v", d)
	}
}

// TestMemoryExcludeFileProblems: mistakes are reported with their place,
// and chunk/memory/hit where they are always empty.
func TestMemoryExcludeFileProblems(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"chunk in a drop rule", "memory:\n  - {id: m, effect: drop, when: chunk.tool == \"x\"}\n", "chunk is only set in memory: rules with effect exclude"},
		{"chunk in a tool rule", "rules:\n  - {id: r, effect: deny, when: chunk.role == \"tool\"}\n", "chunk is only set in memory: rules with effect exclude"},
		{"hit in an exclude rule", "memory:\n  - {id: m, effect: exclude, when: hit.score > 1}\n", "hit is only set in memory: rules with effect drop"},
		{"memory in an exclude rule", "memory:\n  - {id: m, effect: exclude, when: memory.count > 1}\n", "memory is only set in memory: rules with effect drop or refuse"},
		{"misspelt chunk field", "memory:\n  - {id: m, effect: exclude, when: chunk.tol == \"x\"}\n", "tol"},
		{"untested", "memory:\n  - {id: m, effect: exclude, when: chunk.seq > 1}\n", "no test makes this memory rule match"},
		{"test without chunk", "memory:\n  - {id: m, effect: exclude}\ntests:\n  - {name: t, input: {memory: {hits: [{seq: 1}]}}, expect: {excluded: true}}\n", "needs input.memory.chunk"},
		{"test fails", "memory:\n  - {id: m, effect: exclude, when: chunk.seq == 2}\ntests:\n  - {name: t, input: {memory: {chunk: {seq: 2}}}, expect: {excluded: false}}\n", "excluded = true, want false (by m)"},
		{"call without tool", "memory:\n  - {id: m, effect: exclude}\ntests:\n  - {name: t, input: {memory: {chunk: {seq: 2}, call: {args: {}}}}, expect: {excluded: true}}\n", "input.memory.call needs tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: m\nrevision: \"1\"\ndefaults: {tool_call: allow}\n" + tc.body
			_, err := Load(context.Background(), "m.yaml", []byte(src), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "m.yaml:") {
				t.Fatalf("error %v does not name the file and line", err)
			}
		})
	}
}

// TestMemoryExcludeFromSnapshot: a cached load keeps the effect.
func TestMemoryExcludeFromSnapshot(t *testing.T) {
	opts := Options{Cache: privateCache(t)}
	full := loadExcludeExample(t, opts)
	cached := loadExcludeExample(t, opts)
	if FromSnapshot(full) || !FromSnapshot(cached) {
		t.Fatalf("want a full load then a cached one: %t, %t", FromSnapshot(full), FromSnapshot(cached))
	}
	ch := MemoryChunk{Session: "s1", Seq: 2, Role: "tool", Tool: "read_file"}
	if d := cached.Exclude(context.Background(), nil, ch, readFileCall(t, "secrets/k")); !d.Excluded || !cached.HasExcludeRules() {
		t.Fatalf("from the snapshot: %+v", d)
	}
}

// TestDocsMemoryExcludeExample: the docs' example is the file tested here.
func TestDocsMemoryExcludeExample(t *testing.T) {
	file := testutil.ReadFile(t, "testdata/memory-exclude.yaml")
	for _, d := range []string{"../docs/memory.md", "../docs/policy.md"} {
		if !strings.Contains(testutil.ReadFile(t, d), "```yaml\n"+file+"```\n") {
			t.Errorf("%s: the exclude example is not policy/testdata/memory-exclude.yaml", d)
		}
	}
}

// TestMemoryExcludeExplain: explain rules on a case's chunk and shows the
// values each exclude rule saw.
func TestMemoryExcludeExplain(t *testing.T) {
	p := loadExcludeExample(t, Options{})
	in, err := ParseInput("case.yaml", []byte(`
memory:
  chunk: {session: s1, seq: 3, text: "k"}
  call: {tool: read_file, args: {path: notes/../secrets/key.txt}}
`))
	if err != nil {
		t.Fatal(err)
	}
	x, err := p.Explain(in)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := x.Format(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"memory chunk: excluded by no-secrets-in-memory",
		"no-secrets-in-memory: exclude: matched",
		`call.paths = ["secrets/key.txt"]`,
		"env-dump-audit: exclude (dryrun): not matched",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, b.String())
		}
	}
}
