package telemetry_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/telemetry"
)

// discard is a span exporter that drops every span: the SDK's whole cost
// without an exporter's.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkRun is the kernel's BenchmarkRun (kernel/run_bench_test.go:
// the same provider, tool and runs) with telemetry wired in as cmd/kernel
// wires it, to measure what it adds per run and per tool call:
//
//   - off: nothing wired (the kernel's own benchmark, for comparison);
//   - traces-discard: spans recorded and dropped by a no-op exporter;
//   - traces-memory: spans recorded and kept by an in-memory exporter
//     (reset every 1000 runs);
//   - metrics: Prometheus and the GenAI metrics, no traces;
//   - all: traces (discard) and metrics.
//
// (10turns - 1tool) / 8 is the cost of one more turn with one call;
// (10parallel - 1tool) / 9 of one more call.
func BenchmarkRun(b *testing.B) {
	for _, mode := range []string{"off", "traces-discard", "traces-memory", "metrics", "all"} {
		for _, c := range []struct {
			name         string
			turns, calls int
		}{
			{"1tool", 2, 1},
			{"10turns", 10, 1},
			{"10parallel", 2, 10},
		} {
			b.Run(mode+"/"+c.name, func(b *testing.B) {
				mem := tracetest.NewInMemoryExporter()
				cfg := telemetry.Config{Getenv: func(string) string { return "" }, Provider: "openai"}
				switch mode {
				case "traces-discard":
					cfg.SpanExporter = discard{}
				case "traces-memory":
					cfg.SpanExporter = mem
				case "metrics":
					cfg.Metrics.Enabled = true
				case "all":
					cfg.SpanExporter, cfg.Metrics.Enabled = discard{}, true
				}
				k, store, tel := benchKernel(b, &benchProvider{turns: c.turns, calls: c.calls}, cfg)
				defer tel.Shutdown(context.Background())
				ctx := context.Background()
				b.ReportAllocs()
				cpu0 := testutil.CPUTime()
				n := 0
				for b.Loop() {
					res, err := k.Run(ctx, "", "what is in the workspace?")
					if err != nil || res.StopReason != kernel.StopCompleted || res.Turns != c.turns {
						b.Fatal(res, err)
					}
					if err := store.Delete(ctx, res.SessionID); err != nil {
						b.Fatal(err)
					}
					if n++; n%1000 == 0 {
						tel.Flush(ctx)
						mem.Reset()
					}
				}
				b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

func benchKernel(b *testing.B, prov kernel.Provider, tc telemetry.Config) (*kernel.Kernel, kernel.SessionDeleter, *telemetry.Telemetry) {
	reg := kernel.NewRegistry()
	spec := kernel.ToolSpec{Name: "read_file", Description: "read", Tier: kernel.TierReadOnly, Source: "bench",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)}
	if err := reg.Register(kernel.NewTool(spec, func(context.Context, json.RawMessage) (kernel.Result, error) {
		return kernel.Result{Content: "package main"}, nil
	})); err != nil {
		b.Fatal(err)
	}
	tc.Tools = reg
	tel, err := telemetry.New(context.Background(), tc)
	if err != nil {
		b.Fatal(err)
	}
	events := 0
	store := memory.New()
	kc := kernel.Config{Provider: prov, Store: store, Tools: reg, Model: "m", MaxTurns: 16,
		OnEvent: func(kernel.Event) { events++ }}
	if tel.Enabled() { // as cmd/kernel wires it
		kc.Observe = tel.Observe
		kc.Hooks = []kernel.Hook{tel.Hook}
		kc.Provider = tel.Provider(kc.Provider)
	}
	k, err := kernel.New(kc)
	if err != nil {
		b.Fatal(err)
	}
	return k, store, tel
}

// benchProvider is the kernel benchmark's: every turn but the last asks
// for `calls` tool calls, the last answers with text.
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
			tc[i] = kernel.ToolCall{ID: "c" + strconv.Itoa(turn) + "_" + strconv.Itoa(i), Name: "read_file", Arguments: `{"path":"main.go","limit":20}`}
		}
		return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, ToolCalls: tc}, Usage: kernel.Usage{InputTokens: 50, OutputTokens: 10}}, nil
	}
	emit(kernel.Delta{Text: "It is a Go program."})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: "It is a Go program."}, Usage: kernel.Usage{InputTokens: 80, OutputTokens: 6}}, nil
}
