package policy_test

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// TestPooledEnvKeepsCallPathsExact holds the pooled Env's kept storage for
// call.paths to what a fresh Env gives: a call without paths after one with
// paths sees call.paths as nil (not an empty list, not the last call's
// paths), and a call with paths sees only its own.
func TestPooledEnvKeepsCallPathsExact(t *testing.T) {
	const src = `name: paths
revision: "1"
defaults: {tool_call: allow}
rules:
  - id: nil-paths
    effect: ask
    when: call.paths == nil
  - id: env
    effect: deny
    when: any(call.paths, {# == ".env"})
`
	p, err := policy.Compile(context.Background(), "paths.yaml", []byte(src), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	specs := policy.BuiltinSpecs()
	st := &kernel.State{SessionID: "s", Run: 1, Turn: 1}
	call := func(spec kernel.ToolSpec, args string) *kernel.Call {
		c, err := kernel.NewCall("c1", spec, []byte(args), st)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	read, run := specs[0], specs[5]
	for i := range 50 { // the pool hands the same Env back, mostly
		if d := p.Decide(context.Background(), st, call(read, `{"path":"src/../.env"}`)); d.Effect != kernel.EffectDeny || d.Rules[0] != "env" {
			t.Fatalf("%d: read .env: %+v", i, d)
		}
		if d := p.Decide(context.Background(), st, call(run, `{"argv":["ls"]}`)); d.Effect != kernel.EffectAsk || d.Rules[0] != "nil-paths" {
			t.Fatalf("%d: a call without paths: %+v (call.paths must be nil, not the last call's)", i, d)
		}
		if d := p.Decide(context.Background(), st, call(read, `{"path":"main.go"}`)); d.Effect != kernel.EffectAllow {
			t.Fatalf("%d: read main.go: %+v", i, d)
		}
	}
}
