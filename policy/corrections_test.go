package policy_test

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/policy"
)

// protocolPolicy stops a run at its first text-protocol correction; its
// tests set run.corrections directly.
const protocolPolicy = `
name: strict-protocol
revision: "1"
defaults: {tool_call: allow}
budgets:
  - id: protocol
    stop_when: run.corrections >= 1
    message: '"the model broke the tool protocol " + string(run.corrections) + " time(s)"'
tests:
  - name: a clean run goes on
    input: {run: {corrections: 0}}
    expect: {stop: ""}
  - name: one correction stops it
    input: {run: {corrections: 1}}
    expect: {stop: protocol}
`

// TestRunCorrectionsInPolicy: a budget on run.corrections sees the
// corrections of a live text-protocol run and stops it before the model
// is asked again.
func TestRunCorrectionsInPolicy(t *testing.T) {
	ws := newWorkspace(t)
	pol, err := policy.Load(context.Background(), "strict.yaml", []byte(protocolPolicy), policy.Options{Tools: ws.reg.Specs()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := kernel.Config{ModelTools: map[string]kernel.ModelTools{"m": {Protocol: kernel.ToolProtocolText}}}
	h := newHarness(t, ws, pol, cfg,
		kerneltest.Text("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.go\"}}\n</tool_call>\nIt says hello."),
		kerneltest.Text("never asked"))
	res, err := h.k.Run(context.Background(), "", "read a.go")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.BudgetStop("protocol") || h.prov.Remaining() != 1 || ws.calls("read_file") != 0 {
		t.Fatalf("result = %+v, %d replies left, read_file ran %d times", res, h.prov.Remaining(), ws.calls("read_file"))
	}
}
