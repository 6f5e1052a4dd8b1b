package kernel_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/policy"
)

// loopPolicy is a small policy of the kind a framework comparison would
// configure: a default, three tool rules and a budget. None of its rules
// matches the benchmark's call, so every decision is the default's after
// each rule was evaluated.
const loopPolicy = `name: bench
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

// BenchmarkLoop measures a 1-tool run (a scripted model asks for one call,
// the tool answers, the model answers) side by side, in one run:
//
//   - handwritten: the least a turn loop must do: call a provider
//     function, run one tool function, append the messages;
//   - kernel-bare: Kernel.Run configured as a framework comparison would:
//     the same scripted provider in process, one tool, the memory store,
//     no event subscriber, no hooks, no policy;
//   - kernel-hooks-policy: kernel-bare plus the default hooks (the
//     credential scrubber and the output limiter, on results and on the
//     prompt, with their lifecycle points) and a small policy
//     (loopPolicy);
//   - kernel-hooks and kernel-policy: each of the two alone, to tell
//     their shares of the difference apart.
//
// Every case reports cpu-ns/op, the process's CPU time per run (the GC's
// included): on a shared machine it varies less than ns/op. The kernel
// cases report x-handwritten (their cpu-ns/op over handwritten's in the
// same run) and those with hooks or a policy also x-bare (over
// kernel-bare's).
// Run with -count to see the spread; BenchmarkRun's 1tool is kernel-bare
// with an event subscriber.
func BenchmarkLoop(b *testing.B) {
	ctx := context.Background()
	var hand, bare float64
	b.Run("handwritten", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := testutil.CPUTime()
		for b.Loop() {
			if out := handLoop(); out != "It is a Go program." {
				b.Fatal(out)
			}
		}
		hand = cpuPerOp(b, cpu0)
	})
	for _, c := range []struct {
		name          string
		hooks, policy bool
	}{{"kernel-bare", false, false}, {"kernel-hooks-policy", true, true}, {"kernel-hooks", true, false}, {"kernel-policy", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			k, store := loopKernel(b, c.hooks, c.policy)
			b.ReportAllocs()
			cpu0 := testutil.CPUTime()
			for b.Loop() {
				res, err := k.Run(ctx, "", "what is in the workspace?")
				if err != nil || res.StopReason != kernel.StopCompleted || res.Turns != 2 || len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK {
					b.Fatal(res, err)
				}
				if err := store.Delete(ctx, res.SessionID); err != nil {
					b.Fatal(err)
				}
			}
			ns := cpuPerOp(b, cpu0)
			if hand > 0 {
				b.ReportMetric(ns/hand, "x-handwritten")
			}
			if !c.hooks && !c.policy {
				bare = ns
			} else if bare > 0 {
				b.ReportMetric(ns/bare, "x-bare")
			}
		})
	}
}

// cpuPerOp reports and returns the process CPU time per op since cpu0.
func cpuPerOp(b *testing.B, cpu0 time.Duration) float64 {
	ns := float64(testutil.CPUTime()-cpu0) / float64(b.N)
	b.ReportMetric(ns, "cpu-ns/op")
	return ns
}

// handLoop is a hand-written 1-tool turn loop over the kernel's message
// type: what BenchmarkLoop's handwritten case measures.
func handLoop() string {
	ctx := context.Background()
	msgs := []kernel.Message{{Role: kernel.RoleUser, Content: "what is in the workspace?"}}
	for range 16 {
		resp := handProvider(msgs)
		msgs = append(msgs, resp)
		if len(resp.ToolCalls) == 0 {
			return resp.Content
		}
		for _, c := range resp.ToolCalls {
			res, err := handTool(ctx, json.RawMessage(c.Arguments))
			if err != nil {
				res = kernel.Result{Content: err.Error(), IsError: true}
			}
			msgs = append(msgs, kernel.Message{Role: kernel.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: res.Content, IsError: res.IsError})
		}
	}
	return ""
}

// handProvider is benchProvider's 1-tool script as a plain function.
func handProvider(msgs []kernel.Message) kernel.Message {
	if msgs[len(msgs)-1].Role == kernel.RoleUser {
		return kernel.Message{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "c0_0", Name: "read_file", Arguments: `{"path":"main.go","limit":20}`}}}
	}
	return kernel.Message{Role: kernel.RoleAssistant, Content: "It is a Go program."}
}

func handTool(context.Context, json.RawMessage) (kernel.Result, error) {
	return kernel.Result{Content: "package main"}, nil
}

// loopKernel is BenchmarkLoop's kernel: one read-only tool with an
// argument schema, the memory store, no OnEvent; withHooks adds the
// default hook chain, withPolicy loopPolicy.
func loopKernel(b *testing.B, withHooks, withPolicy bool) (*kernel.Kernel, kernel.SessionDeleter) {
	reg := kernel.NewRegistry()
	spec := kernel.ToolSpec{Name: "read_file", Description: "read", Tier: kernel.TierReadOnly, Source: "bench",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)}
	if err := reg.Register(kernel.NewTool(spec, handTool)); err != nil {
		b.Fatal(err)
	}
	store := memory.New()
	cfg := kernel.Config{Provider: &benchProvider{turns: 2, calls: 1}, Store: store, Tools: reg, Model: "m", MaxTurns: 16}
	if withHooks {
		ch, err := hooks.NewChain(hooks.Config{}, hooks.Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		cfg.Hooks, cfg.Points, cfg.ScrubInput = []kernel.Hook{ch.Hook()}, ch.Points(), ch.ScrubResult
	}
	if withPolicy {
		pol, err := policy.Compile(context.Background(), "bench.yaml", []byte(loopPolicy), policy.Options{})
		if err != nil {
			b.Fatal(err)
		}
		cfg.Policy = pol
	}
	k, err := kernel.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return k, store
}
