package policy_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// TestDecisionLogRecordsApprovals: how an ask was decided, and by whom,
// is a line of the decision log, the note redacted.
func TestDecisionLogRecordsApprovals(t *testing.T) {
	src := `name: asks
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: ask-all
    effect: ask
    when: "true"
    message: '"check it"'
tests:
  - name: asks
    input: {call: {tool: write_file, args: {path: a}}}
    expect: {decision: ask, rules: [ask-all]}
`
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	redact := func(s string) string { return strings.ReplaceAll(s, "hunter2", "[REDACTED]") }
	w, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: path, Options: policy.Options{Log: policy.NewDecisionLog(&buf, redact)}})
	if err != nil {
		t.Fatal(err)
	}
	var rec kernel.ApprovalRecorder = w
	a := &kernel.Approval{ID: "ap1", SessionID: "s1", Call: kernel.ToolCall{ID: "c1", Name: "write_file"}, RuleID: "ask-all", Message: "check it", DecisionID: "d1"}
	rec.RecordApproval(&kernel.State{SessionID: "s1", Run: 2, Turn: 3}, a, kernel.ApprovalRecord{ID: "ap1", Approved: true, By: "alice", Note: "pw hunter2 ok"})
	lines, err := policy.ReadDecisionLog("log", &buf)
	if err != nil || len(lines) != 1 {
		t.Fatalf("log = %v, %v", lines, err)
	}
	l := lines[0]
	if l.Approval == nil || !l.Approval.Approved || l.Approval.By != "alice" || l.Approval.Note != "pw [REDACTED] ok" {
		t.Fatalf("approval line = %+v", l.Approval)
	}
	if l.Session != "s1" || l.CallID != "c1" || l.Decision.Effect != kernel.EffectAsk || l.Decision.ID != "d1" || len(l.Decision.Rules) != 1 {
		t.Fatalf("line = %+v", l)
	}
}
