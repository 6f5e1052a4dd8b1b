package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentkernel/agentkernel/telemetry"
)

// TestImportSpansStaysInTheCallsTrace is the attack test of the spans a
// plugin sends back: only spans of the call's trace, under the call's span
// (or under one another), are exported; a plugin's span in another trace,
// under a parent it made up, or posing as the call's own span is dropped.
func TestImportSpansStaysInTheCallsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(context.Background(), telemetry.Config{SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	call := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{9, 9}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), call)
	now := uint64(time.Now().UnixNano())
	span := func(name string, tid trace.TraceID, id, parent trace.SpanID) *tracepb.Span {
		return &tracepb.Span{Name: name, TraceId: tid[:], SpanId: id[:], ParentSpanId: parent[:], StartTimeUnixNano: now, EndTimeUnixNano: now + 1000}
	}
	other := trace.TraceID{7, 7, 7}
	backwards := span("ends before it starts", call.TraceID(), trace.SpanID{5}, call.SpanID())
	backwards.EndTimeUnixNano = now - 1
	td := &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
		span("call", call.TraceID(), trace.SpanID{1}, call.SpanID()),
		span("child", call.TraceID(), trace.SpanID{2}, trace.SpanID{1}),
		span("into another trace", other, trace.SpanID{3}, trace.SpanID{1}),
		span("made-up parent", call.TraceID(), trace.SpanID{4}, trace.SpanID{0xee}),
		span("posing as the call", call.TraceID(), call.SpanID(), trace.SpanID{1}),
		backwards,
	}}}}}}
	b, err := proto.Marshal(td)
	if err != nil {
		t.Fatal(err)
	}
	err = tel.ImportSpans(ctx, "evil", b)
	if err == nil || !strings.Contains(err.Error(), "4 of its 6 spans dropped") {
		t.Fatalf("ImportSpans = %v, want 4 of 6 dropped", err)
	}
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := exp.GetSpans()
	if len(got) != 2 {
		t.Fatalf("exported %d spans, want the 2 of the call's trace", len(got))
	}
	for _, s := range got {
		if s.SpanContext.TraceID() != call.TraceID() || (s.Name != "call" && s.Name != "child") {
			t.Errorf("exported %s in trace %s", s.Name, s.SpanContext.TraceID())
		}
		if v, _ := s.Resource.Set().Value("service.name"); v.AsString() != "agentkernel-plugin-evil" {
			t.Errorf("service.name = %q", v.AsString())
		}
	}
	// Garbage and oversized batches are refused whole.
	if err := tel.ImportSpans(ctx, "evil", []byte("not protobuf")); err == nil {
		t.Error("garbage accepted")
	}
	if err := tel.ImportSpans(ctx, "evil", make([]byte, telemetry.MaxPluginSpanBytes+1)); err == nil {
		t.Error("an oversized batch accepted")
	}
	// Outside a traced call nothing is imported.
	if err := tel.ImportSpans(context.Background(), "evil", b); err != nil {
		t.Errorf("outside a trace: %v", err)
	}
}
