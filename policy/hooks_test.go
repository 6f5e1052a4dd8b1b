package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/policy"
)

// guardedPolicy asks for side effects in a turn whose guardrail did not
// run (failed open), and after any refusal of an after_model hook; its
// own tests set the verdicts in their inputs.
const guardedPolicy = `
name: guarded
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: unguarded-writes
    effect: ask
    when: hooks.before_model.failed && tool.tier != "read_only"
    message: '"the guardrail did not run this turn (" + join(hooks.before_model.hooks, ", ") + "); approve " + tool.name + "?"'
  - id: refused-siblings
    effect: deny
    when: hooks.after_model.refused > 0 && tool.tier == "privileged"
    message: '"a hook refused a call of this answer"'
tests:
  - name: a guarded turn writes
    input: {call: {tool: write_file, args: {path: a.txt, content: x}}}
    expect: {decision: allow}
  - name: an unguarded turn asks
    input:
      hooks: {before_model: {failed: true, hooks: [injection-guard]}}
      call: {tool: write_file, args: {path: a.txt, content: x}}
    expect: {decision: ask, rules: [unguarded-writes], message_contains: injection-guard}
  - name: reads need no guard
    input:
      hooks: {before_model: {failed: true}}
      call: {tool: read_file, args: {path: a.txt}}
    expect: {decision: allow}
  - name: a refusal in the answer denies privileged siblings
    input:
      hooks: {after_model: {refused: 1}}
      call: {tool: run_command, args: {argv: [ls]}}
    expect: {decision: deny}
`

// TestPolicyReadsHookVerdicts: rules read the verdicts of the turn's
// lifecycle points (hooks.before_model.failed, ...), in a file's own
// tests and in a live run, where the kernel's state carries them.
func TestPolicyReadsHookVerdicts(t *testing.T) {
	ws := newWorkspace(t)
	p, err := policy.Load(context.Background(), "guarded.yaml", []byte(guardedPolicy), policy.Options{Tools: ws.reg.Specs()})
	if err != nil {
		t.Fatal(err) // loading runs the file's tests
	}
	if _, err := policy.Load(context.Background(), "typo.yaml", []byte(strings.Replace(guardedPolicy, "before_model.failed", "before_modle.failed", 1)), policy.Options{}); err == nil ||
		!strings.Contains(err.Error(), "before_modle") {
		t.Fatalf("a misspelt point compiles: %v", err)
	}
	failedGuard := kernel.Points{BeforeModel: func(context.Context, *kernel.BeforeModelInput) (kernel.BeforeModelReply, error) {
		return kernel.BeforeModelReply{Failed: []string{"injection-guard"}}, nil
	}}
	h := newHarness(t, ws, p, kernel.Config{Points: failedGuard},
		kerneltest.Calls("write_file", map[string]string{"path": "a.txt", "content": "x"}))
	res, err := h.k.Run(context.Background(), "", "write a file")
	if err != nil || res.StopReason != kernel.StopAwaitingApproval {
		t.Fatalf("stop %v, err %v", res, err)
	}
	if !strings.Contains(res.Pending.Message, "the guardrail did not run this turn (injection-guard)") || ws.calls("write_file") != 0 {
		t.Fatalf("pending %+v", res.Pending)
	}
}
