package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolsShowsNativeGrant: `kernel tools` shows, in GRANTED, the
// sandbox grant run_command runs under (workspace rw, .git ro, no network).
func TestToolsShowsNativeGrant(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "model: {provider: scripted, name: m, script: s.yaml}\nworkspace: ws\ntools:\n  builtin:\n    enable: [read_file, run_command]\n"
	path := filepath.Join(dir, "k.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte("[]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, "tools", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "run_command ") {
			line = l
		}
	}
	for _, want := range []string{"sandbox: fs", ws + ":rw", filepath.Join(ws, ".git") + ":ro", "net none"} {
		if !strings.Contains(line, want) {
			t.Errorf("run_command's GRANTED lacks %q:\n%s", want, out)
		}
	}
}
