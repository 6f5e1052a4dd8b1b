package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKernelWritesNeverFollowLinks is issue 25's finding 5 through the
// CLI: a symbolic link the model planted where the kernel writes its
// events file (--events), a session export (-o) or the decision log is
// refused with an error naming it, and the file it points to is left
// untouched.
func TestKernelWritesNeverFollowLinks(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir()
	target := filepath.Join(t.TempDir(), "victim.txt")
	if err := os.WriteFile(target, []byte("the operator's file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{
		"script.yaml": "steps:\n  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\n",
		"logged.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\n" +
			"policy: {file: policy.yaml, decision_log: " + filepath.Join(ws, "decisions.jsonl") + "}\n",
		"policy.yaml": "name: p\nrevision: \"1\"\ndefaults:\n  tool_call: allow\n",
	})
	for _, name := range []string{"events.jsonl", "export.jsonl", "decisions.jsonl"} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	store := t.TempDir()
	conf := filepath.Join(dir, "kernel.yaml")
	check := func(what string, err error, errOut string) {
		t.Helper()
		if !errors.Is(err, ErrLinkedFile) || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Errorf("%s onto a planted symlink: %v\n%s", what, err, errOut)
		}
		if b, _ := os.ReadFile(target); string(b) != "the operator's file\n" {
			t.Fatalf("%s changed the link's target:\n%s", what, b)
		}
	}
	_, errOut, err := cli(t, "run", "--config", conf, "--store", store, "--events", filepath.Join(ws, "events.jsonl"), "hi")
	check("--events", err, errOut)

	_, errOut, err = cli(t, "run", "--config", conf, "--store", store, "hi")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	id := sessionLine.FindStringSubmatch(errOut)[1]
	_, errOut, err = cli(t, "sessions", "export", "--store", store, "-o", filepath.Join(ws, "export.jsonl"), id)
	check("sessions export -o", err, errOut)

	_, errOut, err = cli(t, "run", "--config", filepath.Join(dir, "logged.yaml"), "--store", store, "hi")
	check("policy.decision_log", err, errOut)
}
