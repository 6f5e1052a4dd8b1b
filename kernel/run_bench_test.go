package kernel_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// BenchmarkRun measures whole runs through Kernel.Run with a provider that
// answers at once: memory store, events on, schema validation on.
//
//   - 1tool: the prompt, a turn with one read-only tool call, the tool, a
//     turn with the final answer.
//   - 10turns: ten sequential turns, nine of them with one tool call each;
//     (10turns - 1tool) / 8 is the cost of one extra turn.
//   - 10parallel: one turn with ten read-only calls (run concurrently),
//     then the answer.
//
// Each iteration deletes its session, so the number is a run's cost, not
// the GC's cost of b.N sessions. cpu-ns/op is the process's CPU time per
// run, the GC's included: on a shared machine it varies less than ns/op.
func BenchmarkRun(b *testing.B) {
	for _, c := range []struct {
		name         string
		turns, calls int
	}{
		{"1tool", 2, 1},
		{"10turns", 10, 1},
		{"10parallel", 2, 10},
	} {
		b.Run(c.name, func(b *testing.B) {
			prov := &benchProvider{turns: c.turns, calls: c.calls}
			k, store := benchKernel(b, prov)
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := testutil.CPUTime()
			for b.Loop() {
				res, err := k.Run(ctx, "", "what is in the workspace?")
				if err != nil || res.StopReason != kernel.StopCompleted || res.Turns != c.turns {
					b.Fatal(res, err)
				}
				if err := store.Delete(ctx, res.SessionID); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkDispatch measures the pipeline around a no-op tool, schema
// validation included: one model turn with one call, minus a turn without.
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"with-call", "no-call"} {
		b.Run(mode, func(b *testing.B) {
			prov := &benchProvider{turns: 2, calls: 1}
			if mode == "no-call" {
				prov.turns, prov.calls = 1, 0
			}
			k, store := benchKernel(b, prov)
			b.ReportAllocs()
			for b.Loop() {
				res, err := k.Run(ctx, "", "go")
				if err != nil {
					b.Fatal(err)
				}
				if err := store.Delete(ctx, res.SessionID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchKernel(b *testing.B, prov kernel.Provider) (*kernel.Kernel, kernel.SessionDeleter) {
	reg := kernel.NewRegistry()
	spec := kernel.ToolSpec{Name: "read_file", Description: "read", Tier: kernel.TierReadOnly, Source: "bench",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)}
	if err := reg.Register(kernel.NewTool(spec, func(context.Context, json.RawMessage) (kernel.Result, error) {
		return kernel.Result{Content: "package main"}, nil
	})); err != nil {
		b.Fatal(err)
	}
	events := 0
	store := memory.New()
	k, err := kernel.New(kernel.Config{Provider: prov, Store: store, Tools: reg, Model: "m", MaxTurns: 16,
		OnEvent: func(kernel.Event) { events++ }})
	if err != nil {
		b.Fatal(err)
	}
	return k, store
}

// benchProvider answers like a scripted provider: every turn but the last
// of a run asks for `calls` tool calls, the last answers with text. It
// counts the turns of the current run from the request (the assistant
// messages after the last user message), so it keeps no state.
type benchProvider struct{ turns, calls int }

func (p *benchProvider) Stream(_ context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	turn := 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != kernel.RoleUser; i-- {
		if req.Messages[i].Role == kernel.RoleAssistant {
			turn++
		}
	}
	if turn < p.turns-1 && p.calls > 0 {
		tc := make([]kernel.ToolCall, p.calls)
		for i := range tc {
			tc[i] = kernel.ToolCall{ID: callIDs[turn][i], Name: "read_file", Arguments: `{"path":"main.go","limit":20}`}
		}
		return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, ToolCalls: tc}, Usage: kernel.Usage{InputTokens: 50, OutputTokens: 10}}, nil
	}
	emit(kernel.Delta{Text: "It is a Go program."})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: "It is a Go program."}, Usage: kernel.Usage{InputTokens: 80, OutputTokens: 6}}, nil
}

// callIDs[turn][i] is the id of call i of a turn: unique in a session.
var callIDs = func() (ids [16][10]string) {
	for t := range ids {
		for i := range ids[t] {
			ids[t][i] = "c" + strconv.Itoa(t) + "_" + strconv.Itoa(i)
		}
	}
	return ids
}()
