package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes name → body under dir and returns dir.
func writeFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBuiltinEnableEmpty: "tools.builtin.enable: []" in kernel.yaml turns
// every built-in off, run_command included; the embedded default (the key
// omitted) stays the three read-only tools.
func TestBuiltinEnableEmpty(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"none.yaml":    "workspace: ws\ntools:\n  builtin:\n    enable: []\n",
		"default.yaml": "workspace: ws\n",
		"ws/a.txt":     "a\n",
	})
	out, errOut, err := cli(t, "tools", "--config", filepath.Join(dir, "none.yaml"), "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if strings.Contains(out, `"name"`) {
		t.Fatalf("enable: [] still offers tools:\n%s", out)
	}
	out, errOut, err = cli(t, "tools", "--config", filepath.Join(dir, "default.yaml"), "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, n := range []string{"read_file", "list_dir", "search"} {
		if !strings.Contains(out, `"name": "`+n+`"`) {
			t.Fatalf("default lacks %s:\n%s", n, out)
		}
	}
	if strings.Contains(out, "run_command") || strings.Contains(out, "write_file") {
		t.Fatalf("default offers a write tool:\n%s", out)
	}
}
