package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestSearchCannotOutrunPolicy is issue 25's search finding through the
// CLI, under examples/policies/coding.yaml (whose env-files rule asks
// before anything touches a .env file): a workspace with a large
// node_modules made the glob's listing for policy stop early, before
// services/api/.env, so the search read it with no ask. Now the call is
// refused and nothing is read (a glob that fits is listed whole, and the
// rule asks).
func TestSearchCannotOutrunPolicy(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	dir, ws := t.TempDir(), t.TempDir()
	files := map[string]string{"services/api/.env": "API_TOKEN=tok-secret-9\n"}
	for i := range 1001 {
		files[fmt.Sprintf("node_modules/p%04d/.envrc", i)] = "API_TOKEN=\n" // selected by the glob, not an env file to the rule
	}
	writeFiles(t, ws, files)
	writeFiles(t, dir, map[string]string{
		"script.yaml": "steps:\n  - tool_calls:\n      - {name: search, args: {pattern: API_TOKEN, glob: \".env*\"}}\n  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\n" +
			"policy: {file: " + absPath("../../examples/policies/coding.yaml") + "}\ntools:\n  builtin:\n    enable: [read_file, list_dir, search, write_file, edit_file, run_command]\n",
	})
	out := runAndShow(t, filepath.Join(dir, "kernel.yaml"), "find the token")
	if strings.Contains(out, "services/api/.env") || strings.Contains(out, "matching line") {
		t.Fatalf("the search read files policy never saw:\n%.3000s", out)
	}
	if !strings.Contains(out, "nothing was searched") {
		t.Fatalf("the search was not refused:\n%.3000s", out)
	}
}

// TestSearchIsNoOracle: a redacted key cannot be recovered by searching
// for longer and longer prefixes of it: search matches the text the
// scrubber leaves, so the count says nothing about what it hid.
func TestSearchIsNoOracle(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"creds.txt": "aws key: AKIA6PYCDYBK155OXTZ7\n"})
	writeFiles(t, dir, map[string]string{
		"script.yaml": "steps:\n  - tool_calls:\n" +
			"      - {name: search, args: {pattern: AKIA6PYC}}\n" +
			"      - {name: search, args: {pattern: AKIA6PYD}}\n" +
			"      - {name: search, args: {pattern: aws key}}\n" +
			"  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\ntools:\n  builtin:\n    enable: [search]\n",
	})
	out := runAndShow(t, filepath.Join(dir, "kernel.yaml"), "guess")
	if n := strings.Count(out, "search: no matches"); n != 2 {
		t.Errorf("the right and the wrong prefix answer differently (%d of 2 found nothing):\n%s", n, out)
	}
	if !strings.Contains(out, "aws key: [REDACTED]") || strings.Contains(out, "AKIA6PYCDYBK155OXTZ7\n") {
		t.Errorf("the visible part of the line is not found, or the key shows:\n%s", out)
	}
}

// runAndShow runs the CLI with the configuration conf on prompt, in a
// fresh store, and returns `sessions show --full` of the session.
func runAndShow(t *testing.T, conf, prompt string) string {
	t.Helper()
	store := t.TempDir()
	_, errOut, err := cli(t, "run", "--config", conf, "--store", store, prompt)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	out, _, err := cli(t, "sessions", "show", "--full", "--store", store, sessionLine.FindStringSubmatch(errOut)[1])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
