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

// TestMemoryCLI: with memory on (scope owner), a second session's request
// holds what the first said (the script's match fails otherwise);
// `kernel memory search` finds it with its provenance and `kernel memory
// status` counts it; the index lives beside the store, not in the
// workspace.
func TestMemoryCLI(t *testing.T) {
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
	write("second.yaml", "turns:\n  - text: \"It is in the memory above.\"\n")
	base := "workspace: ws\nstore: {dir: store}\nmemory: {enabled: true, scope: owner}\n"
	first := write("first-kernel.yaml", "model: {provider: scripted, name: m, script: first.yaml}\n"+base)
	second := write("second-kernel.yaml", "model: {provider: scripted, name: m, script: second.yaml}\n"+base)
	if _, errOut, err := cli(t, "run", "--config", first, "Remember: the vault passphrase of the Orion project is cobalt-harbor-1937."); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if _, errOut, err := cli(t, "run", "--config", second, "What is the Orion vault passphrase?"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	// The second session stored the injected message with its request.
	st, err := badger.Open(filepath.Join(dir, "store"), badger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	metas, err := st.List(context.Background())
	if err != nil || len(metas) != 2 {
		t.Fatalf("%d sessions, %v", len(metas), err)
	}
	sess, err := st.Load(context.Background(), metas[0].ID) // the most recent
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	injected := ""
	for _, m := range sess.Messages {
		if m.Role == kernel.RoleSystem && strings.HasPrefix(m.Content, memory.Header) {
			injected = m.Content
		}
	}
	if !strings.Contains(injected, "cobalt-harbor-1937") || !strings.Contains(injected, "session "+metas[1].ID+" message 1, user") {
		t.Fatalf("the second session holds no memory of the first: %q", injected)
	}
	out, errOut, err := cli(t, "memory", "search", "--config", first, "Orion passphrase")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(out, "cobalt-harbor-1937") || !strings.Contains(out, "message 1, user") {
		t.Fatalf("memory search printed:\n%s", out)
	}
	out, errOut, err = cli(t, "memory", "status", "--config", first)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(out, "backlog:    0 messages") || !strings.Contains(out, "store.memory") {
		t.Fatalf("memory status printed:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "store.memory")); err != nil {
		t.Fatalf("the index is not beside the store: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "ws")); len(entries) != 0 {
		t.Fatalf("memory wrote into the workspace: %v", entries)
	}
}
