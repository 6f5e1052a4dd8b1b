package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/policy"
)

// memoryPolicyFile drops read_file results from memory's injection and
// refuses injection for an "off the record" prompt.
const memoryPolicyFile = `name: memory-e2e
revision: "1"
defaults: {tool_call: allow}
memory:
  - id: no-file-reads
    effect: drop
    when: hit.tool == "read_file"
  - id: off-the-record
    effect: refuse
    when: run.prompt contains "off the record"
    message: '"the prompt is off the record (" + string(memory.count) + " hits)"'
tests:
  - name: read_file results are dropped
    input:
      memory: {hits: [{session: s, seq: 2, role: tool, tool: read_file}, {session: s, seq: 1}]}
    expect: {memory: inject, dropped: [1]}
  - name: off the record refuses
    input:
      run: {prompt: "off the record: hi"}
      memory: {hits: [{session: s, seq: 1}]}
    expect: {memory: refuse, memory_rules: [off-the-record]}
`

// TestMemoryPolicy: with memory on and a policy with a memory: section,
// a later session's request holds what the first session's user said but
// not what its read_file returned (a drop rule), and a prompt the refuse
// rule matches gets no memory message at all; each ruling is a notice on
// the run's output and a line of the decision log, and `sessions show
// --context` shows nothing injected for the refused run. Without the
// policy wired into memory's injection both would be injected.
func TestMemoryPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("ws/notes.txt", "Orion launch code: amber-falcon-42\n")
	write("first.yaml", `turns:
  - tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - match: {role: tool, contains: "amber-falcon-42"}
    text: "Read it."
`)
	write("later.yaml", "turns:\n  - text: \"Answered.\"\n")
	write("policy.yaml", memoryPolicyFile)
	base := "workspace: ws\nstore: {dir: store}\nmemory: {enabled: true, scope: owner}\n" +
		"policy: {file: policy.yaml, decision_log: decisions.jsonl}\n"
	first := write("first-kernel.yaml", "model: {provider: scripted, name: m, script: first.yaml}\n"+base)
	later := write("later-kernel.yaml", "model: {provider: scripted, name: m, script: later.yaml}\n"+base)
	if _, errOut, err := cli(t, "run", "--config", first, "Orion deploy target is s3://orion-drops; read notes.txt for the Orion code."); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	_, dropOut, err := cli(t, "run", "--config", later, "What do we know about Orion?")
	if err != nil {
		t.Fatalf("%v\n%s", err, dropOut)
	}
	_, refuseOut, err := cli(t, "run", "--config", later, "off the record: what do we know about Orion?")
	if err != nil {
		t.Fatalf("%v\n%s", err, refuseOut)
	}

	st, err := badger.Open(filepath.Join(dir, "store"), badger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	metas, err := st.List(context.Background())
	if err != nil || len(metas) != 3 {
		st.Close()
		t.Fatalf("%d sessions, %v", len(metas), err)
	}
	injected := map[string]string{} // session → its memory message
	for _, m := range metas {
		sess, err := st.Load(context.Background(), m.ID)
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		for _, msg := range sess.Messages {
			if msg.Role == kernel.RoleSystem && strings.HasPrefix(msg.Content, memory.Header) {
				injected[m.ID] = msg.Content
			}
		}
	}
	st.Close()
	refused, dropped, firstID := metas[0].ID, metas[1].ID, metas[2].ID // most recent first
	if got := injected[dropped]; !strings.Contains(got, "s3://orion-drops") || strings.Contains(got, "amber-falcon-42") {
		t.Fatalf("the drop rule did not hold: the second session's memory message is %q", got)
	}
	if got, ok := injected[refused]; ok {
		t.Fatalf("the refuse rule did not hold: the third session got %q", got)
	}
	if !strings.Contains(dropOut, "(session "+firstID+" message ") || !strings.Contains(dropOut, "dropped by rule no-file-reads") {
		t.Fatalf("the drop is not visible on the run's output:\n%s", dropOut)
	}
	if !strings.Contains(refuseOut, "memory injection refused by rule off-the-record: the prompt is off the record") {
		t.Fatalf("the refusal is not visible on the run's output:\n%s", refuseOut)
	}
	out, errOut, err := cli(t, "sessions", "show", "--config", later, "--context", refused)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if strings.Contains(out, "Relevant context from memory") || !strings.Contains(out, "  memory               0\n") {
		t.Fatalf("sessions show --context of the refused run shows an injection:\n%s", out)
	}
	f, err := os.Open(filepath.Join(dir, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := policy.ReadDecisionLog("decisions.jsonl", f)
	if err != nil {
		t.Fatal(err)
	}
	var ruled []string
	for _, r := range recs {
		if m := r.Memory; m != nil && r.Session != firstID {
			ruled = append(ruled, r.Session+" "+strings.Join(m.Rules(), ","))
		}
	}
	if !containsLine(ruled, dropped+" no-file-reads") || !containsLine(ruled, refused+" off-the-record,no-file-reads") {
		t.Fatalf("the decision log's memory lines: %q", ruled)
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestMemoryPolicyCLI: `kernel policy test` runs a file's memory tests and
// `kernel policy explain --input` explains a case with a memory section.
func TestMemoryPolicyCLI(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte(memoryPolicyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := cli(t, "policy", "test", file)
	if err != nil || !strings.Contains(out, "2 tests") {
		t.Fatalf("policy test: %v\n%s%s", err, out, errOut)
	}
	input := filepath.Join(dir, "case.yaml")
	if err := os.WriteFile(input, []byte("run: {prompt: \"off the record\"}\nmemory:\n  hits:\n    - {session: s1, seq: 3, role: tool, tool: read_file}\n    - {session: s1, seq: 4}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = cli(t, "policy", "explain", file, "--input", input)
	if err != nil {
		t.Fatalf("policy explain: %v\n%s", err, errOut)
	}
	for _, want := range []string{"memory: 2 hits, refused by off-the-record", "dropped: hit 1 (session s1 message 3) by no-file-reads", `run.prompt = "off the record"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("policy explain lacks %q:\n%s", want, out)
		}
	}
}

// TestMemoryPolicyReload: memory's Allow rules with the policy in force at
// each injection (a reload applies to the next one), and hands the rules
// what the hit is: its tool, age, session and owner as the run sees them.
func TestMemoryPolicyReload(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	v1 := `name: r
revision: "1"
defaults: {tool_call: allow}
memory:
  - {id: files, effect: drop, when: 'hit.tool == "read_file"'}
  - {id: old, effect: drop, when: 'hit.age > duration("48h")'}
  - {id: foreign, effect: drop, when: 'not hit.same_owner'}
  - {id: elsewhere, effect: drop, when: 'not hit.same_session and hit.source == "vector"'}
tests:
  - {name: files, input: {memory: {hits: [{tool: read_file, same_owner: true, same_session: true}]}}, expect: {dropped: [1]}}
  - {name: old, input: {memory: {hits: [{age: 72h, same_owner: true, same_session: true}]}}, expect: {dropped: [1]}}
  - {name: foreign, input: {memory: {hits: [{same_session: true}]}}, expect: {dropped: [1]}}
  - {name: elsewhere, input: {memory: {hits: [{source: vector, same_owner: true}]}}, expect: {dropped: [1]}}
`
	v2 := `name: r
revision: "2"
defaults: {tool_call: allow}
memory:
  - {id: never, effect: refuse}
tests:
  - {name: never, input: {memory: {hits: [{seq: 1}]}}, expect: {memory: refuse}}
`
	if err := os.WriteFile(file, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := policy.NewWatcher(ctx, policy.WatcherConfig{Path: file})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	allow := memoryPolicy(w, "owner")
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	st := &kernel.State{SessionID: "s1", Run: 1, Turn: 1, Now: now, Labels: map[string]string{memory.OwnerLabel: "alice"}, ToolCounts: map[string]int{}}
	var notices []string
	in := &kernel.BeforeModelInput{PointInfo: kernel.NewPointInfo(kernel.PointBeforeModel, st, func(e kernel.Event) {
		if n, ok := e.(kernel.Notice); ok {
			notices = append(notices, n.Text)
		}
	})}
	hit := func(sid, owner, tool string, src memory.Source, age time.Duration) memory.Hit {
		return memory.Hit{Source: src, Score: 1, Chunk: memory.Chunk{SessionID: sid, Owner: owner, Seq: 1, Role: "tool", Tool: tool, Time: now.Add(-age), Text: "x"}}
	}
	hits := []memory.Hit{
		hit("s1", "alice", "", memory.SourceText, time.Hour),          // kept
		hit("s1", "alice", "read_file", memory.SourceText, time.Hour), // files
		hit("s0", "alice", "", memory.SourceHybrid, 72*time.Hour),     // old
		hit("s0", "bob", "", memory.SourceText, time.Hour),            // foreign
		hit("s0", "alice", "", memory.SourceVector, time.Hour),        // elsewhere
		hit("s0", "alice", "", memory.SourceHybrid, time.Hour),        // kept
	}
	kept, err := allow(ctx, in, hits)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0].Chunk.Tool != "" || kept[0].Chunk.SessionID != "s1" || kept[1].Source != memory.SourceHybrid || kept[1].Chunk.SessionID != "s0" {
		t.Fatalf("kept %+v", kept)
	}
	if len(notices) != 1 || strings.Count(notices[0], "dropped by rule") != 4 {
		t.Fatalf("notices %q", notices)
	}
	if err := os.WriteFile(file, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if kept, err := allow(ctx, in, hits); err != nil || kept != nil {
		t.Fatalf("after the reload: kept %d hits, %v; want the injection refused", len(kept), err)
	}
	if len(notices) != 2 || !strings.Contains(notices[1], "refused by rule never") {
		t.Fatalf("notices %q", notices)
	}
	if memoryPolicy(nil, "owner") != nil {
		t.Fatal("without a policy file memory's Allow is set")
	}
}
