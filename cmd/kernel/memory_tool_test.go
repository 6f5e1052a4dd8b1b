package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/memory"
)

// TestMemorySearchToolCLI: with memory on (scope owner) kernel run offers
// memory_search; a new session's model calls it and gets what an earlier
// session said, with provenance. An agent whose memory is off
// (agents.NAME.memory: off) gets no injection and its memory_search is
// refused; an agent scope wider than memory.scope, or one without memory
// enabled, is refused at load naming the line; without memory the tool is
// not registered.
func TestMemorySearchToolCLI(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	os.Mkdir(filepath.Join(dir, "ws"), 0o700)
	write("first.yaml", "turns:\n  - text: \"Noted.\"\n")
	write("search.yaml", `turns:
  - tool_calls:
      - name: memory_search
        args: {query: "Orion vault passphrase", scope: owner}
  - text: "Found it."
`)
	base := "workspace: ws\nstore: {dir: store}\nmemory: {enabled: true, scope: owner}\n" +
		"tools: {builtin: {enable: [read_file]}}\n"
	agents := `agents:
  forgetful:
    description: remembers nothing
    tools: [memory_search]
    memory: off
    model: {script: search.yaml}
`
	first := write("first-kernel.yaml", "model: {provider: scripted, name: m, script: first.yaml}\n"+base)
	second := write("second-kernel.yaml", "model: {provider: scripted, name: m, script: search.yaml}\n"+base+agents)
	if _, errOut, err := cli(t, "run", "--config", first, "Remember: the vault passphrase of the Orion project is cobalt-harbor-1937."); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	out, errOut, err := cli(t, "tools", "--config", second)
	if err != nil || !strings.Contains(out, "memory_search") {
		t.Fatalf("kernel tools does not list memory_search (%v):\n%s%s", err, out, errOut)
	}
	if _, errOut, err := cli(t, "run", "--config", second, "What is the Orion vault passphrase?"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if _, errOut, err := cli(t, "run", "--config", second, "--agent", "forgetful", "What is the Orion vault passphrase?"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	st, err := badger.Open(filepath.Join(dir, "store"), badger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	metas, err := st.List(ctx)
	if err != nil || len(metas) != 3 {
		t.Fatalf("%d sessions, %v", len(metas), err)
	}
	firstID := metas[2].ID // List is most recent first
	result := func(id string) (kernel.Message, bool) {
		sess, err := st.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		injected := false
		var res kernel.Message
		for _, m := range sess.Messages {
			if m.Role == kernel.RoleSystem && strings.HasPrefix(m.Content, memory.Header) {
				injected = true
			}
			if m.Role == kernel.RoleTool && m.ToolName == memory.SearchToolName {
				res = m
			}
		}
		return res, injected
	}
	if res, _ := result(metas[1].ID); res.IsError || !strings.Contains(res.Content, "cobalt-harbor-1937") ||
		!strings.Contains(res.Content, "[session "+firstID+" message 1, user, ") {
		t.Fatalf("memory_search in a new session answered %q; want the first session's fact with its provenance", res.Content)
	}
	res, injected := result(metas[0].ID)
	if !res.IsError || !strings.Contains(res.Content, `memory is off for agent "forgetful"`) || strings.Contains(res.Content, "cobalt") {
		t.Fatalf("memory_search of an agent without memory answered %q (error %v)", res.Content, res.IsError)
	}
	if injected {
		t.Fatal("memory was injected into the requests of an agent whose memory is off")
	}

	// Refused at load: wider than memory.scope, or memory off.
	for name, c := range map[string]struct{ yaml, want string }{
		"wider": {"model: {provider: scripted, name: m, script: first.yaml}\nworkspace: ws\nstore: {dir: store2}\nmemory: {enabled: true, scope: session}\n" +
			"agents:\n  a:\n    description: x\n    tools: [memory_search]\n    memory: owner\n",
			`:9:13: agent "a": memory: memory scope owner is wider than memory.scope (session)`},
		"disabled": {"model: {provider: scripted, name: m, script: first.yaml}\nworkspace: ws\nstore: {dir: store2}\n" +
			"agents:\n  a:\n    description: x\n    tools: [read_file]\n    memory: session\n",
			`:8:13: agent "a": memory: memory is not enabled: set memory.enabled: true`},
		"no tool without memory": {"model: {provider: scripted, name: m, script: first.yaml}\nworkspace: ws\nstore: {dir: store2}\n" +
			"agents:\n  a:\n    description: x\n    tools: [memory_search]\n",
			`unknown tool "memory_search"`},
	} {
		cfg := write("bad-"+strings.ReplaceAll(name, " ", "-")+".yaml", c.yaml)
		_, errOut, err := cli(t, "run", "--config", cfg, "hello")
		if err == nil || !strings.Contains(err.Error()+errOut, c.want) {
			t.Fatalf("%s: err %v, stderr %q; want %q", name, err, errOut, c.want)
		}
	}
}
