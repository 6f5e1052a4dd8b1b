package policy_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// loopChecksPolicy is kernel's BenchmarkLoop policy: a default, three
// tool rules (none matches the call) and a budget on run.turn.
const loopChecksPolicy = `name: bench
revision: "1"
defaults: {tool_call: allow}
budget: {max_turns: 50}
rules:
  - id: no-secrets
    effect: deny
    tools: [read_file]
    when: call.args.path contains ".env"
    message: '"no secrets"'
  - id: no-etc
    effect: deny
    when: any(call.paths, {# startsWith "/etc/"})
    message: '"not outside the workspace"'
  - id: big-reads
    effect: ask
    tools: [read_file]
    when: call.args.limit > 10000
    message: '"read " + string(call.args.limit) + " lines?"'
budgets:
  - id: turns
    stop_when: run.turn > budget.max_turns
`

// BenchmarkLoopChecks is what the policy does in one of BenchmarkLoop's
// runs (a 1-tool run of two turns): a budget check before each model
// call, one decision, a budget check after the tools. It reports
// cpu-ns/op, the process CPU time per run's checks.
func BenchmarkLoopChecks(b *testing.B) {
	ctx := context.Background()
	p, err := policy.Compile(ctx, "bench.yaml", []byte(loopChecksPolicy), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	spec := kernel.ToolSpec{Name: "read_file", Tier: kernel.TierReadOnly, Source: "bench",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)}
	st := &kernel.State{SessionID: "s", Model: "m", Run: 1, Turn: 1, MaxTurns: 16, Prompt: "what is in the workspace?", ToolCounts: map[string]int{}}
	c, err := kernel.NewCall("c0_0", spec, json.RawMessage(`{"path":"main.go","limit":20}`), st)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := testutil.CPUTime()
	for b.Loop() {
		if v := p.Budget(ctx, st, kernel.BeforeModel); v.Stop != nil {
			b.Fatal(v.Stop)
		}
		if d := p.Decide(ctx, st, c); d.Effect != kernel.EffectAllow {
			b.Fatal(d)
		}
		if v := p.Budget(ctx, st, kernel.AfterTools); v.Stop != nil {
			b.Fatal(v.Stop)
		}
		if v := p.Budget(ctx, st, kernel.BeforeModel); v.Stop != nil {
			b.Fatal(v.Stop)
		}
	}
	b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
