package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginsLock: `kernel plugins lock DIR` writes DIR/agentkernel.lock
// and prints the sha256 to pin, which is the lock's; a missing directory
// is an error naming it.
func TestPluginsLock(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"plugin.py": "serve()", "lib/util.py": "x = 1"})
	out, _, err := cli(t, "plugins", "lock", dir)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "agentkernel.lock"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	if want := "sha256: " + hex.EncodeToString(sum[:]); !strings.Contains(out, want) || !strings.Contains(out, "locked 2 files") {
		t.Fatalf("output %q lacks %q", out, want)
	}
	if strings.Count(string(lock), "\n") != 2 || !strings.Contains(string(lock), "  lib/util.py\n") {
		t.Fatalf("lock:\n%s", lock)
	}
	if _, _, err := cli(t, "plugins", "lock", filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v", err)
	}
}

// TestInterpretedPluginInWorkspaceRefused: an interpreted plugin's
// directory is one of the kernel's own files: inside the writable
// workspace, the model could change what the plugin runs next time, and
// the kernel refuses to start.
func TestInterpretedPluginInWorkspaceRefused(t *testing.T) {
	ws := writeFiles(t, t.TempDir(), map[string]string{"plugin/plugin.py": "serve()"})
	cfgDir := writeFiles(t, t.TempDir(), map[string]string{
		"script.yaml": "steps:\n  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\ntools:\n  builtin:\n    enable: [write_file]\n  plugins:\n" +
			"    - name: p\n      interpreter: {path: /usr/bin/python3}\n      path: " + filepath.Join(ws, "plugin/plugin.py") +
			"\n      sha256: " + strings.Repeat("ab", 32) + "\n",
	})
	_, _, err := cli(t, "run", "--config", filepath.Join(cfgDir, "kernel.yaml"), "--store", t.TempDir(), "go")
	if !errors.Is(err, ErrProtectedWritable) || !strings.Contains(err.Error(), "the directory of plugin p") {
		t.Fatalf("err = %v, want the plugin's directory refused as writable", err)
	}
}
