package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `kernel policy check` accepts the previous release's names and warns
// about each use with its file:line:col and the name to write.
func TestPolicyCheckWarnsDeprecatedNames(t *testing.T) {
	const file = "../../policy/testdata/deprecated/turn-names.yaml"
	out, errOut, err := cli(t, "policy", "check", "--config", "../../examples/kernel.yaml", file)
	if err != nil || !strings.Contains(out, "ok  "+file) {
		t.Fatalf("check: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	for _, want := range []string{
		"warning: " + file + ":8:9: vars.late: turn.round is deprecated: write run.turn",
		"warning: " + file + ":8:23: vars.late: turn.max_rounds is deprecated: write run.max_turns",
		"warning: " + file + ":21:13: test \"late in the run asks\": input.turn is deprecated: write input.run",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	_, errOut, err = cli(t, "policy", "check", "--config", "../../examples/kernel.yaml", "../../examples/policies/coding.yaml")
	if err != nil || strings.Contains(errOut, "deprecated") {
		t.Fatalf("coding.yaml: %v\n%s", err, errOut)
	}
}

// A run under such a policy works and logs each use as a warning at start,
// where an operator who never runs `policy check` sees it.
func TestRunWarnsDeprecatedNames(t *testing.T) {
	const file = "../../policy/testdata/deprecated/turn-names.yaml"
	script := filepath.Join(t.TempDir(), "answer.yaml")
	if err := os.WriteFile(script, []byte("steps:\n  - text: hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := cli(t, "run", "--config", "../../examples/kernel.yaml", "--policy", file,
		"--script", script, "--store", t.TempDir(), "hi")
	if err != nil || !strings.Contains(out, "hello") {
		t.Fatalf("run: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	for _, want := range []string{
		"policy uses a deprecated name",
		"deprecated/turn-names.yaml:13:21: rule \\\"ask-late\\\": when: turn.number is deprecated: write run.number",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// A script written with the old "steps:" runs, and the kernel warns with
// its file:line:col and the name to write; one with "turns:" is quiet.
func TestRunWarnsDeprecatedScriptSteps(t *testing.T) {
	dir := t.TempDir()
	old, now := filepath.Join(dir, "old.yaml"), filepath.Join(dir, "new.yaml")
	if err := os.WriteFile(old, []byte("# written before turns\nsteps:\n  - text: hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(now, []byte("turns:\n  - text: hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := cli(t, "run", "--script", old, "--store", t.TempDir(), "hi")
	if err != nil || !strings.Contains(out, "hello") {
		t.Fatalf("run: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if want := "script uses a deprecated name: problem=\"" + old + ":2:1: steps is deprecated: write turns\""; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	out, errOut, err = cli(t, "run", "--script", now, "--store", t.TempDir(), "hi")
	if err != nil || !strings.Contains(out, "hello") || strings.Contains(errOut, "deprecated") {
		t.Fatalf("run with turns: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
}
