package policy

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
)

func loadMemoryExample(t *testing.T, opts Options) *Policy {
	t.Helper()
	p, err := LoadFile(context.Background(), "testdata/memory.yaml", opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMemoryExampleTests runs the example file's own tests (Load refuses
// a file whose tests fail or leave a rule untested).
func TestMemoryExampleTests(t *testing.T) {
	p := loadMemoryExample(t, Options{})
	rep, err := p.RunTests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed() || len(rep.Results) != 4 {
		var b bytes.Buffer
		_ = rep.Format(&b, true)
		t.Fatalf("want 4 passing tests:\n%s", b.String())
	}
}

func memState() *kernel.State {
	return &kernel.State{SessionID: "s1", Run: 1, Turn: 1, ToolCounts: map[string]int{}, Now: DefaultNow}
}

// TestMemoryRuling holds the section's semantics: drop rules remove hits,
// refuse rules see what is left, errors fail closed, dry runs only report.
func TestMemoryRuling(t *testing.T) {
	p := loadMemoryExample(t, Options{})
	ctx := context.Background()
	own := func(seq int, tool string, score float64) MemoryHit {
		return MemoryHit{Session: "s1", Seq: seq, Role: "tool", Tool: tool, Source: "text", Score: score, SameSession: true, SameOwner: true}
	}
	for _, tc := range []struct {
		name    string
		hits    []MemoryHit
		refused string
		kept    []int
		dropped []string // rank:rule
		would   []string
	}{
		{name: "nothing to rule on", kept: []int{}},
		{name: "all kept", hits: []MemoryHit{own(1, "", 0.9), own(2, "list_dir", 0.5)}, kept: []int{1, 2}},
		{name: "drop one source", hits: []MemoryHit{own(1, "read_file", 0.9), own(2, "", 0.5)}, kept: []int{2}, dropped: []string{"1:no-file-reads"}},
		{name: "refuse sees the hits left after drops",
			hits:    []MemoryHit{own(1, "read_file", 0.9), {Session: "s1", Seq: 4, Source: "vector", Score: 0.3, SameSession: true, SameOwner: true}},
			refused: "weak-vector-only", kept: []int{}, dropped: []string{"1:no-file-reads"}},
		{name: "dry run reports, injects", hits: []MemoryHit{{Session: "s9", Seq: 1, Source: "text", Score: 1}}, kept: []int{1}, would: []string{"other-owner-audit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Memory(ctx, memState(), MemoryRetrieval{Scope: "session", Hits: tc.hits})
			if d.Rule != tc.refused || d.Refused != (tc.refused != "") {
				t.Errorf("refused %t by %q, want %q (%s)", d.Refused, d.Rule, tc.refused, d.Message)
			}
			if tc.refused != "" && !strings.Contains(d.Message, "only weak vector matches (1)") {
				t.Errorf("message %q", d.Message)
			}
			if len(d.Kept) != len(tc.kept) {
				t.Fatalf("kept %v, want %v", d.Kept, tc.kept)
			}
			for i := range tc.kept {
				if d.Kept[i] != tc.kept[i] {
					t.Fatalf("kept %v, want %v", d.Kept, tc.kept)
				}
			}
			var dropped []string
			for _, x := range d.Dropped {
				dropped = append(dropped, strconv.Itoa(x.Rank)+":"+x.Rule)
			}
			if strings.Join(dropped, ",") != strings.Join(tc.dropped, ",") {
				t.Errorf("dropped %v, want %v", dropped, tc.dropped)
			}
			if strings.Join(d.WouldRefuse, ",") != strings.Join(tc.would, ",") {
				t.Errorf("would refuse %v, want %v", d.WouldRefuse, tc.would)
			}
			if d.Revision != "2026-11-28.1" || d.SHA256 != p.SHA256() || d.ID == "" {
				t.Errorf("decision not attributed: %+v", d)
			}
		})
	}
}

// TestMemoryFailsClosed: a rule that cannot be evaluated drops the hit (a
// drop rule) or refuses (a refuse rule).
func TestMemoryFailsClosed(t *testing.T) {
	p := compileT(t, `
name: m
revision: "1"
defaults: {tool_call: allow}
memory:
  - id: bad-drop
    effect: drop
    when: int(hit.text) > 3
`)
	d := p.Memory(context.Background(), memState(), MemoryRetrieval{Hits: []MemoryHit{{Session: "s", Seq: 1, Text: "not a number"}}})
	if len(d.Kept) != 0 || len(d.Dropped) != 1 || d.Dropped[0].Err == "" {
		t.Fatalf("a failing drop rule kept the hit: %+v", d)
	}
	p = compileT(t, `
name: m
revision: "1"
defaults: {tool_call: allow}
memory:
  - id: bad-refuse
    effect: refuse
    when: int(memory.hits[0].text) > 3
`)
	d = p.Memory(context.Background(), memState(), MemoryRetrieval{Hits: []MemoryHit{{Session: "s", Seq: 1, Text: "x"}}})
	if !d.Refused || !strings.Contains(d.Message, "fail closed") {
		t.Fatalf("a failing refuse rule did not refuse: %+v", d)
	}
}

// TestMemoryFileProblems: the section's mistakes are reported with their
// place, and the env's memory and hit where they are always empty.
func TestMemoryFileProblems(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"bad effect", "memory:\n  - {id: m, effect: deny}\n", `memory rule "m": effect must be refuse, drop or exclude, got "deny"`},
		{"no effect", "memory:\n  - {id: m}\n", "effect is required: refuse"},
		{"bad mode", "memory:\n  - {id: m, effect: drop, mode: loud}\n", "mode must be enforce or dryrun"},
		{"duplicate id", "rules:\n  - {id: m, effect: deny}\nmemory:\n  - {id: m, effect: drop}\n", `duplicate id "m"`},
		{"misspelt field", "memory:\n  - {id: m, effect: drop, when: hit.scroe > 1}\n", "scroe"},
		{"hit in a refuse rule", "memory:\n  - {id: m, effect: refuse, when: hit.score > 1}\n", "hit is only set in memory: rules with effect drop"},
		{"memory in a tool rule", "rules:\n  - {id: r, effect: deny, when: memory.count > 1}\n", "memory is only set in memory: rules"},
		{"untested", "memory:\n  - {id: m, effect: drop, when: hit.score > 1}\n", "no test makes this memory rule match"},
		{"test without input", "memory:\n  - {id: m, effect: drop}\ntests:\n  - {name: t, expect: {memory: inject}}\n", "needs input.memory"},
		{"test bad expectation", "memory:\n  - {id: m, effect: drop}\ntests:\n  - {name: t, input: {memory: {hits: [{seq: 1}]}}, expect: {memory: maybe}}\n", "expect.memory must be inject or refuse"},
		{"test bad source", "memory:\n  - {id: m, effect: drop}\ntests:\n  - {name: t, input: {memory: {hits: [{seq: 1, source: bm25}]}}, expect: {dropped: [1]}}\n", "source must be text, vector or hybrid"},
		{"test fails", "memory:\n  - {id: m, effect: drop, when: hit.seq == 2}\ntests:\n  - {name: t, input: {memory: {hits: [{seq: 1}, {seq: 2}]}}, expect: {dropped: [1]}}\n", "dropped = [2], want [1]"},
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

// TestMemoryFromSnapshot: a load the test cache vouches for (the snapshot,
// not the YAML) still has the memory rules and rules as the full load does.
func TestMemoryFromSnapshot(t *testing.T) {
	opts := Options{Cache: privateCache(t)}
	full := loadMemoryExample(t, opts)
	cached := loadMemoryExample(t, opts)
	if FromSnapshot(full) || !FromSnapshot(cached) {
		t.Fatalf("want a full load then a cached one: %t, %t", FromSnapshot(full), FromSnapshot(cached))
	}
	r := MemoryRetrieval{Hits: []MemoryHit{
		{Session: "s1", Seq: 1, Tool: "read_file", Source: "text", Score: 1, SameSession: true, SameOwner: true},
		{Session: "s1", Seq: 2, Source: "vector", Score: 0.1, SameSession: true, SameOwner: true},
	}}
	a, b := full.Memory(context.Background(), memState(), r), cached.Memory(context.Background(), memState(), r)
	if !a.Refused || !b.Refused || a.Rule != b.Rule || len(b.Dropped) != 1 || b.Dropped[0].Rule != "no-file-reads" {
		t.Fatalf("full %+v, from the snapshot %+v", a, b)
	}
}

// TestMemoryDecisionLog: a ruling is a line of the decision log, with the
// rules, the dropped hits and the redacted message.
func TestMemoryDecisionLog(t *testing.T) {
	var buf bytes.Buffer
	log := NewDecisionLog(&buf, func(s string) string { return strings.ReplaceAll(s, "weak", "[REDACTED]") })
	p := loadMemoryExample(t, Options{Log: log})
	p.Memory(context.Background(), memState(), MemoryRetrieval{Hits: []MemoryHit{
		{Session: "s1", Seq: 3, Tool: "read_file", Source: "text", Score: 1, SameSession: true, SameOwner: true, Text: "secret text"},
		{Session: "s1", Seq: 4, Source: "vector", Score: 0.1, SameSession: true, SameOwner: true},
	}})
	line := buf.String()
	recs, err := ReadDecisionLog("log", &buf)
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d lines, %v:\n%s", len(recs), err, line)
	}
	m := recs[0].Memory
	if m == nil || !m.Refused || m.Rule != "weak-vector-only" || len(m.Dropped) != 1 || m.Dropped[0].Seq != 3 ||
		recs[0].Session != "s1" || !strings.Contains(m.Message, "[REDACTED]") {
		t.Fatalf("line %s", line)
	}
	if strings.Contains(line, "secret text") || !strings.Contains(line, `"eval_time":"`) || m.EvalTime <= 0 {
		t.Fatalf("the line holds a hit's text or no eval_time string: %s", line)
	}
}

// TestMemoryExplain: explain shows the ruling and each memory rule.
func TestMemoryExplain(t *testing.T) {
	p := loadMemoryExample(t, Options{})
	in, err := ParseInput("case.yaml", []byte(`
memory:
  hits:
    - {session: s1, seq: 3, role: tool, tool: read_file, score: 0.9, same_session: true, same_owner: true}
    - {session: s1, seq: 4, source: vector, score: 0.3, same_session: true, same_owner: true}
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
		"memory: 2 hits, refused by weak-vector-only",
		"dropped: hit 1 (session s1 message 3) by no-file-reads",
		"no-file-reads: drop: matched (hits 1)",
		"weak-vector-only: refuse: matched",
		"memory.count = 1",
		"other-owner-audit: refuse (dryrun): not matched",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, b.String())
		}
	}
}

// TestDocsMemoryExample: docs/memory.md's worked example is the file
// TestMemoryExampleTests loads and tests.
func TestDocsMemoryExample(t *testing.T) {
	doc := testutil.Section(testutil.ReadFile(t, "../docs/memory.md"), "## Policy")
	file := testutil.ReadFile(t, "testdata/memory.yaml")
	if !strings.Contains(doc, "```yaml\n"+file+"```\n") {
		t.Fatal(`docs/memory.md, "Policy": the yaml example is not policy/testdata/memory.yaml`)
	}
}

// BenchmarkMemoryRuling is the cost of one ruling of the example file (two
// drop rules, one refuse rule, one dry run) on k = 8 hits: what the
// policy adds to each model request with memory on.
func BenchmarkMemoryRuling(b *testing.B) {
	p, err := LoadFile(context.Background(), "testdata/memory.yaml", Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := MemoryRetrieval{Scope: "owner"}
	for i := range 8 {
		r.Hits = append(r.Hits, MemoryHit{Session: "s1", Seq: i + 1, Role: "tool", Tool: []string{"read_file", "search"}[i%2],
			Source: "hybrid", Score: 1 / float64(i+1), SameSession: i < 4, SameOwner: true, Age: time.Duration(i) * 240 * time.Hour})
	}
	st := memState()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p.Memory(ctx, st, r)
	}
}
