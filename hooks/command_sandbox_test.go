//go:build linux

package hooks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// TestCommandHookSandbox: a command hook that tries to write outside its
// grant (the workspace it may only read, a directory it was not granted,
// the kernel's environment through /proc) fails; what it was granted works.
func TestCommandHookSandbox(t *testing.T) {
	const key = "sk-hook-kernel-secret-90ab"
	t.Setenv("AGENTKERNEL_TEST_HOOK_KEY", key)
	ws, outside, granted := t.TempDir(), t.TempDir(), t.TempDir()
	hook := shellHook(t, `echo x > "$1/marker"; echo x > "$2/marker"; echo ok > "$3/marker"; cat /proc/1/environ /proc/$PPID/environ > "$3/env"; exit 0`)
	cfg := parseConfig(t, commandRule("writer", PhaseBefore, []string{hook, ws, outside, granted},
		", sandbox: {fs: [{path: "+granted+", mode: rw}]}"))
	ch, err := NewChain(cfg, Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	tool := newTextTool("echo", kernel.TierReadOnly, nil)
	r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
		kerneltest.Calls("echo", map[string]any{"text": "x"}), kerneltest.Text("ok"))
	r.run()
	for _, d := range []string{ws, outside} {
		if _, err := os.Stat(filepath.Join(d, "marker")); err == nil {
			t.Fatalf("the hook wrote outside its grant: %s", d)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(granted, "marker")); string(b) != "ok\n" {
		t.Fatalf("the hook could not write its granted directory: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(granted, "env")); strings.Contains(string(b), key) {
		t.Fatal("the hook read the kernel's environment")
	}
}
