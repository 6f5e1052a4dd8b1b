package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/telemetry"
)

// TestAgentSpansNest: a child agent's run is traced under the caller's
// execute_tool span of its agent call: its invoke_agent span's parent is
// that span, in the caller's trace, and its chat span is under its own
// invoke_agent.
func TestAgentSpansNest(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	store := memory.New()
	all := kernel.NewRegistry()
	tel, err := telemetry.New(context.Background(), telemetry.Config{SpanExporter: exp, Provider: "openai", Tools: all,
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := kernel.New(kernel.Config{Provider: tel.Provider(kerneltest.NewProvider(kerneltest.Text("fine"))), Store: store, Model: "m2",
		Tools: kernel.NewRegistry(), Agent: "worker", Hooks: []kernel.Hook{tel.Hook}, Observe: tel.Observe})
	if err != nil {
		t.Fatal(err)
	}
	at, err := kernel.AgentTool(kernel.Agent{Name: "worker", Description: "checks", Kernel: worker, Tier: kernel.TierReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if err := all.Register(at); err != nil {
		t.Fatal(err)
	}
	lead, err := kernel.New(kernel.Config{Store: store, Model: "m1", Tools: all, Agent: "lead", Hooks: []kernel.Hook{tel.Hook}, Observe: tel.Observe,
		Provider: tel.Provider(kerneltest.NewProvider(kerneltest.Calls("agent.worker", map[string]any{"task": "check"}), kerneltest.Text("done")))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := lead.Run(context.Background(), "", "go")
	if err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatal(res, err)
	}
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	tools := byName(spans, "execute_tool agent.worker")
	if len(tools) != 1 {
		t.Fatalf("execute_tool spans: %v", names(spans))
	}
	call := tools[0]
	var child, childChat *tracetest.SpanStub
	for i := range spans {
		s := &spans[i]
		if s.Parent.SpanID() == call.SpanContext.SpanID() && s.Name == "invoke_agent worker" {
			child = s
		}
	}
	if child == nil {
		t.Fatalf("no invoke_agent span of the worker under the call's execute_tool span: %v", names(spans))
	}
	if child.SpanContext.TraceID() != call.SpanContext.TraceID() {
		t.Fatal("the child's run is traced in another trace")
	}
	if v, _ := attr(*child, "agentkernel.agent.depth"); v.AsInt64() != 1 {
		t.Fatalf("child depth attribute %v", v.Emit())
	}
	if v, _ := attr(*child, "agentkernel.agent.parent_session"); v.AsString() != res.SessionID {
		t.Fatalf("child parent_session attribute %q, want %s", v.AsString(), res.SessionID)
	}
	if v, _ := attr(*child, "gen_ai.agent.name"); v.AsString() != "worker" {
		t.Fatalf("child gen_ai.agent.name %q", v.AsString())
	}
	for i := range spans {
		s := &spans[i]
		if s.Parent.SpanID() == child.SpanContext.SpanID() && s.Name == "chat m2" {
			childChat = s
		}
	}
	if childChat == nil {
		t.Fatalf("no chat span of the worker's model under its invoke_agent: %v", names(spans))
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+" (parent "+s.Parent.SpanID().String()+", id "+s.SpanContext.SpanID().String()+")")
	}
	return out
}
