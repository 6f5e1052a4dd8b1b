package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestHooksReloadWithConfig rewrites kernel.yaml under a running app: a
// valid rewrite swaps the hooks in, a broken one keeps them and reports it.
func TestHooksReloadWithConfig(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "kernel.yaml")
	write := func(rule string) {
		body := "hooks:\n  rules:\n    - name: " + rule + "\n      phase: before\n      block_when: 'true'\n      message: no\n"
		tmp := cfgPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil { // as editors do
			t.Fatal(err)
		}
	}
	write("first")
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(t.Context(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	wait := watchReloads(t, a)
	ruleName := func() string { return a.chain.Config().Rules[0].Name }
	write("second")
	if r := wait(); r.Error != "" || ruleName() != "second" {
		t.Fatalf("valid rewrite: event %+v, rule %s", r, ruleName())
	}
	os.WriteFile(cfgPath, []byte("hooks:\n  rules:\n    - name: broken\n      phase: sideways\n"), 0o600)
	r := wait()
	if r.Error == "" || !strings.Contains(r.Error, "phase") || ruleName() != "second" {
		t.Fatalf("broken rewrite: event %+v, rule %s", r, ruleName())
	}
}

// watchReloads starts a's config watcher and returns a function that waits
// for the next config.reloaded event.
func watchReloads(t *testing.T, a *app) func() kernel.ConfigReloaded {
	t.Helper()
	reloads := make(chan kernel.ConfigReloaded, 10)
	a.sink = func(e kernel.Event) {
		if r, ok := e.(kernel.ConfigReloaded); ok {
			reloads <- r
		}
	}
	if err := a.watchConfig(); err != nil {
		t.Fatal(err)
	}
	return func() kernel.ConfigReloaded {
		select {
		case r := <-reloads:
			return r
		case <-time.After(20 * time.Second):
			t.Fatal("no config.reloaded event")
		}
		return kernel.ConfigReloaded{}
	}
}
