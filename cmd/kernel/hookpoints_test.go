package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// hookPointsSetup writes a configuration with a scripted model, a
// policy with a decision log and telemetry content on; the example's
// hooks are laid over it by a second --config.
func hookPointsSetup(t *testing.T, script string) (cfg, dir string) {
	t.Helper()
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o600)
	os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte("name: p\nrevision: \"1\"\ndefaults: {tool_call: allow}\n"), 0o600)
	cfg = filepath.Join(dir, "kernel.yaml")
	os.WriteFile(cfg, []byte("model: {provider: scripted, name: m, script: script.yaml}\n"+
		"policy: {file: policy.yaml, decision_log: decisions.jsonl}\n"+
		"telemetry: {content: true}\n"), 0o600)
	return cfg, dir
}

// TestPIIRedactionNeverSeen runs `kernel run` with examples/hooks/pii.yaml
// over a model that answers with an email address and a social security
// number: the user's terminal, the event stream, the stored session, the
// traces (content on) and the decision log see only [REDACTED].
func TestPIIRedactionNeverSeen(t *testing.T) {
	cfg, dir := hookPointsSetup(t, "turns:\n  - text: 'Write to jane.doe@example.com; her SSN is 078-05-1120.'\n"+
		"    reasoning: 'jane.doe@example.com is on file'\n")
	exp := tracetest.NewInMemoryExporter()
	store := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	out, errOut, err := cliSpans(t, exp, "run", "--config", cfg, "--config", "../../examples/hooks/pii.yaml",
		"--store", store, "--events", events, "how do I reach Jane?")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	secret := func(s string) bool { return strings.Contains(s, "jane.doe@") || strings.Contains(s, "078-05") }
	if secret(out) || secret(errOut) || !strings.Contains(out, "Write to [REDACTED]; her SSN is [REDACTED].") {
		t.Fatalf("the user saw:\n%s\n%s", out, errOut)
	}
	b, err := os.ReadFile(events)
	if err != nil || secret(string(b)) || !strings.Contains(string(b), `"type":"hook.rewrote","hook":"pii","phase":"after_model","what":"redacted"`) {
		t.Fatalf("events (%v):\n%s", err, b)
	}
	show, _, err := cli(t, "sessions", "show", "--full", "--store", store, sessionLine.FindStringSubmatch(errOut)[1])
	if err != nil || secret(show) || !strings.Contains(show, "[REDACTED]") {
		t.Fatalf("the session (%v):\n%s", err, show)
	}
	spans := exp.GetSpans()
	guard := false
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if secret(kv.Value.Emit()) {
				t.Errorf("span %s exports the PII in %s", s.Name, kv.Key)
			}
		}
		guard = guard || s.Name == "guardrail pii" && spanAttr(s, "agentkernel.hook.outcome") == "changed"
	}
	if !guard {
		t.Fatalf("no guardrail span for the redaction among %d spans", len(spans))
	}
	log, err := os.ReadFile(filepath.Join(dir, "decisions.jsonl"))
	if err != nil || secret(string(log)) {
		t.Fatalf("decision log (%v):\n%s", err, log)
	}
	var line struct {
		Session string `json:"session_id"`
		Hook    struct{ Hook, Phase, Outcome string }
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(log))), &line); err != nil || line.Hook.Hook != "pii" ||
		line.Hook.Phase != "after_model" || line.Hook.Outcome != "changed" || line.Session == "" {
		t.Fatalf("decision log line %+v (%v):\n%s", line, err, log)
	}
}
