package main

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/schema"
)

// validateEvents checks every line of an --events file against
// schemas/events.schema.json and returns the event types in order.
func validateEvents(t *testing.T, path string) []string {
	t.Helper()
	s, err := schema.Embedded("events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if err := s.ValidateJSON(line); err != nil {
			t.Errorf("%s line %d does not match schemas/events.schema.json: %v\n%s", filepath.Base(path), n, err, line)
			continue
		}
		typ, _, _ := strings.Cut(strings.TrimPrefix(string(line), `{"type":"`), `"`)
		types = append(types, typ)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return types
}

// TestEventsFileMatchesSchema runs scripted sessions with --events (the
// demo, then a run that stops for approval under the coding policy and its
// approval) and validates every line the CLI wrote against
// schemas/events.schema.json.
func TestEventsFileMatchesSchema(t *testing.T) {
	tmp := t.TempDir()
	seen := map[string]bool{}

	demo := filepath.Join(tmp, "demo.jsonl")
	if _, errOut, err := cli(t, "run", "--config", demoConfig, "--events", demo, "--quiet", "What does it do?"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, ty := range validateEvents(t, demo) {
		seen[ty] = true
	}

	conf, _ := codingPolicyFixture(t)
	store := t.TempDir()
	runEv, approveEv := filepath.Join(tmp, "run.jsonl"), filepath.Join(tmp, "approve.jsonl")
	_, errOut, err := cli(t, "run", "--config", conf, "--store", store, "--events", runEv, "add a note")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	m := sessionLine.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no session id in:\n%s", errOut)
	}
	if _, errOut, err := cli(t, "approve", "--config", conf, "--store", store, "--events", approveEv, "--yes", m[1]); err != nil {
		t.Fatalf("approve: %v\n%s", err, errOut)
	}
	for _, f := range []string{runEv, approveEv} {
		types := validateEvents(t, f)
		if len(types) == 0 || types[0] != "run.started" || types[len(types)-1] != "run.completed" {
			t.Errorf("%s: event stream %v", filepath.Base(f), types)
		}
		for _, ty := range types {
			seen[ty] = true
		}
	}
	// The scenarios exercise the events whose shapes matter most.
	for _, want := range []string{"run.started", "turn.started", "model.request", "message.completed", "tool.started",
		"tool.completed", "policy.decision", "approval.required", "approval.resolved", "run.completed"} {
		if !seen[want] {
			t.Errorf("no %s event in the scenarios (saw %v)", want, slices.Sorted(maps.Keys(seen)))
		}
	}
}

// codingPolicyFixture writes a scripted session under
// examples/policies/coding.yaml: the model first tries `rm -rf build`
// (denied), then writes NOTES.md outside src/ (awaits approval), then
// answers "Wrote NOTES.md.". It returns the kernel.yaml and the workspace.
func codingPolicyFixture(t *testing.T) (conf, ws string) {
	t.Helper()
	dir := t.TempDir()
	ws = filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	script := `steps:
  - tool_calls:
      - name: run_command
        args: {argv: [rm, -rf, build]}
  - match: {role: tool, contains: "destructive command refused"}
    tool_calls:
      - name: write_file
        args: {path: NOTES.md, content: "remember the milk\n"}
  - match: {role: tool}
    text: "Wrote NOTES.md."
`
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\npolicy: {file: " +
		absPath("../../examples/policies/coding.yaml") + "}\ntools:\n  builtin:\n    enable: [read_file, list_dir, search, write_file, edit_file, run_command]\n"
	for name, body := range map[string]string{"script.yaml": script, "kernel.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "kernel.yaml"), ws
}
