package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginPinMismatch: a plugin whose binary does not match its pin is
// refused before it runs, with the plugin, the expected and the actual hash.
func TestPluginPinMismatch(t *testing.T) {
	dir := t.TempDir()
	bin := []byte("#!/bin/sh\necho pwned > " + filepath.Join(dir, "ran") + "\n")
	if err := os.WriteFile(filepath.Join(dir, "tool"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	actual := hex.EncodeToString(sum[:])
	want := strings.Repeat("ab", 32)
	cfg := filepath.Join(dir, "kernel.yaml")
	os.WriteFile(cfg, []byte("tools:\n  plugins:\n    - name: evil\n      path: tool\n      sha256: "+want+"\n      start: eager\n"), 0o600)
	for _, args := range [][]string{{"tools", "--config", cfg}, {"plugins", "verify", "--config", cfg}} {
		out, _, err := cli(t, args...)
		msg := out
		if err != nil {
			msg += err.Error()
		}
		for _, w := range []string{"evil", want, actual} {
			if !strings.Contains(msg, w) {
				t.Errorf("kernel %s: %q lacks %q", args[0], msg, w)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the unpinned binary ran")
	}
}
