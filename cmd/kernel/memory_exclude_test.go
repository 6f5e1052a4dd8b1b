package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/policy"
)

// memoryExcludePolicyFile keeps tool results of calls on secrets/ out of
// memory's index; the tool rule only makes the file load (every file
// decides tool calls).
const memoryExcludePolicyFile = `name: index-rules
revision: "1"
defaults: {tool_call: allow}
memory:
  - id: no-secrets-in-memory
    effect: exclude
    when: 'chunk.role == "tool" and any(call.paths, {# startsWith "secrets/"})'
tests:
  - name: secrets are not indexed
    input: {memory: {chunk: {seq: 2}, call: {tool: read_file, args: {path: secrets/key.txt}}}}
    expect: {excluded: true}
  - name: notes are
    input: {memory: {chunk: {seq: 3}, call: {tool: read_file, args: {path: notes/a.txt}}}}
    expect: {excluded: false}
`

// TestMemoryExcludePolicy: a policy rule with effect exclude keeps what
// read_file read under secrets/ out of memory's index: `kernel memory
// search` finds the read of notes/a.txt, not that of secrets/key.txt
// (with memory.exclude unset: the policy alone does it), also after
// `kernel memory reindex`. Without the policy wired into the indexer the
// secret is found.
func TestMemoryExcludePolicy(t *testing.T) {
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
	write("ws/secrets/key.txt", "the heron vault key is amber-lantern-77\n")
	write("ws/notes/a.txt", "the heron nests by the river in spring\n")
	write("script.yaml", `turns:
  - tool_calls:
      - name: read_file
        args: {path: secrets/key.txt}
      - name: read_file
        args: {path: ./notes/a.txt}
  - text: "Read."
`)
	write("policy.yaml", memoryExcludePolicyFile)
	cfg := write("kernel.yaml", "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\nstore: {dir: store}\n"+
		"tools: {builtin: {enable: [read_file]}}\npolicy: {file: policy.yaml}\nmemory: {enabled: true}\n")
	if _, errOut, err := cli(t, "run", "--config", cfg, "What do the heron files say?"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	out, errOut, err := cli(t, "memory", "search", "--config", cfg, "-k", "20", "heron vault key nests river amber lantern")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if strings.Contains(out, "amber-lantern") {
		t.Fatalf("a read of secrets/ is indexed:\n%s", out)
	}
	if !strings.Contains(out, "tool read_file") || !strings.Contains(out, "nests by the river") {
		t.Fatalf("the read of notes/ is not indexed:\n%s", out)
	}
	if !strings.Contains(out, "What do the heron files say?") {
		t.Fatalf("the user's prompt is not indexed:\n%s", out)
	}
	// kernel memory reindex indexes the store again under the same rules.
	if _, errOut, err := cli(t, "memory", "reindex", "--config", cfg); err != nil {
		t.Fatalf("reindex: %v\n%s", err, errOut)
	}
	out, errOut, err = cli(t, "memory", "search", "--config", cfg, "-k", "20", "heron vault key nests river amber lantern")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if strings.Contains(out, "amber-lantern") || !strings.Contains(out, "nests by the river") {
		t.Fatalf("after reindex:\n%s", out)
	}
}

// TestMemoryExcludePolicyReload: the indexer's exclusion reads the policy
// in force at each chunk (a reload applies to what is indexed next),
// combines with memory.exclude (either excludes), rules on user chunks
// too, logs dry runs, and fails closed on arguments that do not parse.
func TestMemoryExcludePolicyReload(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(memoryExcludePolicyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := policy.NewWatcher(ctx, policy.WatcherConfig{Path: file})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var logged bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Warn})
	exclude, excludeCall := memoryIndexPolicy(w, nil, log, memoryExclude("", []string{"list_dir"}, nil))
	if exclude == nil || excludeCall == nil {
		t.Fatal("with a policy file the indexer has no exclusion")
	}
	tool := func(name string) *memory.Chunk {
		return &memory.Chunk{SessionID: "s1", Seq: 2, Role: "tool", Tool: name, Time: time.Now(), Text: "x"}
	}
	read := func(path string) *kernel.ToolCall {
		return &kernel.ToolCall{ID: "c1", Name: "read_file", Arguments: `{"path":"` + path + `"}`}
	}
	user := &memory.Chunk{SessionID: "s1", Seq: 1, Role: "user", Text: "read secrets/key.txt please"}
	switch {
	case !excludeCall(tool("read_file"), read("secrets/key.txt")):
		t.Fatal("the policy did not exclude a read of secrets/")
	case !excludeCall(tool("read_file"), read("notes/../secrets/key.txt")):
		t.Fatal("a path through .. escaped the rule")
	case excludeCall(tool("read_file"), read("notes/a.txt")):
		t.Fatal("a read of notes/ was excluded")
	case !excludeCall(tool("list_dir"), &kernel.ToolCall{ID: "c2", Name: "list_dir", Arguments: `{}`}):
		t.Fatal("memory.exclude no longer applies next to the policy")
	case !excludeCall(tool("read_file"), &kernel.ToolCall{ID: "c3", Name: "read_file", Arguments: `{"path":`}):
		t.Fatal("arguments that do not parse were indexed")
	case exclude(user):
		t.Fatal("the user's words were excluded")
	}
	v2 := `name: index-rules
revision: "2"
defaults: {tool_call: allow}
memory:
  - {id: no-user-words, effect: exclude, when: 'chunk.role == "user" and chunk.session == session.id'}
  - {id: audit, effect: exclude, mode: dryrun, when: 'chunk.role == "tool"'}
tests:
  - {name: user, input: {memory: {chunk: {role: user}}}, expect: {excluded: true}}
  - {name: audit, input: {memory: {chunk: {role: tool}}}, expect: {excluded: false}}
`
	if err := os.WriteFile(file, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if !exclude(user) {
		t.Fatal("after the reload the user's words were indexed")
	}
	if excludeCall(tool("read_file"), read("secrets/key.txt")) {
		t.Fatal("after the reload the old rule still excludes")
	}
	if !strings.Contains(logged.String(), "would not be indexed by rule audit (dryrun)") || !strings.Contains(logged.String(), "do not parse") {
		t.Fatalf("logged:\n%s", logged.String())
	}
	if e, ec := memoryIndexPolicy(nil, nil, log, nil); e != nil || ec != nil {
		t.Fatal("without a policy file or memory.exclude the indexer excludes")
	}
}
