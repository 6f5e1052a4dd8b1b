package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/memory"
)

// TestMemoryCLIPostgres: with memory on and the postgres store, the index
// is the session database's: a second session's request holds what the
// first said (the injected message is stored with it, provenance and
// all), and `kernel memory search` and `status` read it there.
func TestMemoryCLIPostgres(t *testing.T) {
	t.Setenv("AK_MEM_DSN", pgtest.Shared(t).Migrated(t))
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
	base := "workspace: ws\nstore: {driver: postgres, dsn_env: AK_MEM_DSN}\nmemory: {enabled: true, scope: owner}\n"
	first := write("first-kernel.yaml", "model: {provider: scripted, name: m, script: first.yaml}\n"+base)
	second := write("second-kernel.yaml", "model: {provider: scripted, name: m, script: second.yaml}\n"+base)
	if _, errOut, err := cli(t, "run", "--config", first, "Remember: the vault passphrase of the Orion project is cobalt-harbor-1937."); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if _, errOut, err := cli(t, "run", "--config", second, "What is the Orion vault passphrase?"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	// The second session stored the injected message with its request.
	st, err := postgres.Open(context.Background(), os.Getenv("AK_MEM_DSN"), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	metas, err := st.List(context.Background())
	if err != nil || len(metas) != 2 {
		t.Fatalf("%d sessions, %v", len(metas), err)
	}
	sess, err := st.Load(context.Background(), metas[0].ID)
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
	if !strings.Contains(out, "postgres") || !strings.Contains(out, "session database") {
		t.Fatalf("memory status printed:\n%s", out)
	}
}
