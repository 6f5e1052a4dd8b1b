package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPromptSecretsScrubbed: the CLI wires the scrubber into what a person
// types (kernel.Config.ScrubInput): a kernel serve key pasted into a
// prompt is stored redacted, as it would be in a tool's output.
func TestPromptSecretsScrubbed(t *testing.T) {
	const key = "aks_5f0c2a9e81d4_q3V8ZkP1xLw0RmT6yHc2NbJ4sUa7GdE9fKo5iXpQrW1"
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"script.yaml": "steps:\n  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + t.TempDir() + "\n",
	})
	out := runAndShow(t, filepath.Join(dir, "kernel.yaml"), "call the API with "+key)
	if strings.Contains(out, key) || !strings.Contains(out, "call the API with [REDACTED]") {
		t.Fatalf("the typed key was stored:\n%s", out)
	}
}
