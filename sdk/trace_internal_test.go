package sdk

import (
	"context"
	"encoding/hex"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// fakeStream is the server side of one Call: it keeps what is sent.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent []*pluginpb.CallEvent
}

func (f *fakeStream) Context() context.Context         { return f.ctx }
func (f *fakeStream) Send(e *pluginpb.CallEvent) error { f.sent = append(f.sent, e); return nil }

// TestCallSpansFollowTraceparent: a call whose metadata carries a sampled
// traceparent gets a span (a child of the host's) and the handler's own
// spans under it, all sent back with the result as OTLP; a call without
// one, or with an unsampled one, records and sends nothing.
func TestCallSpansFollowTraceparent(t *testing.T) {
	tool := Text(Spec{Name: "work", Description: "works", Schema: `{"type":"object"}`, Tier: ReadOnly}, func(ctx context.Context, _ struct{}) (string, error) {
		_, span := StartSpan(ctx, "step")
		span.End()
		return "done", nil
	})
	svc, err := newService([]*Tool{tool}, false)
	if err != nil {
		t.Fatal(err)
	}
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	call := func(md metadata.MD) *pluginpb.Result {
		t.Helper()
		ctx := context.Background()
		if md != nil {
			ctx = metadata.NewIncomingContext(ctx, md)
		}
		st := &fakeStream{ctx: ctx}
		if err := svc.Call(&pluginpb.CallRequest{Tool: "work", Args: []byte(`{}`)}, st); err != nil {
			t.Fatal(err)
		}
		return st.sent[len(st.sent)-1].GetResult()
	}
	res := call(metadata.Pairs("traceparent", "00-"+traceID+"-"+parentID+"-01"))
	if res.GetContent() != "done" {
		t.Fatalf("result %q", res.GetContent())
	}
	var td tracepb.TracesData
	if err := proto.Unmarshal(res.GetSpans(), &td); err != nil {
		t.Fatalf("spans do not decode as OTLP TracesData: %v", err)
	}
	byName := map[string]*tracepb.Span{}
	for _, rs := range td.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				byName[s.GetName()] = s
			}
		}
	}
	callSpan, step := byName["work"], byName["step"]
	if callSpan == nil || step == nil || len(byName) != 2 {
		t.Fatalf("spans %v, want work and step", byName)
	}
	if hex.EncodeToString(callSpan.GetTraceId()) != traceID || hex.EncodeToString(callSpan.GetParentSpanId()) != parentID ||
		callSpan.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the call's span is not a server child of the host's span: trace %x parent %x kind %v", callSpan.GetTraceId(), callSpan.GetParentSpanId(), callSpan.GetKind())
	}
	if string(step.GetParentSpanId()) != string(callSpan.GetSpanId()) || string(step.GetTraceId()) != string(callSpan.GetTraceId()) {
		t.Errorf("the handler's span is not a child of the call's")
	}
	for name, md := range map[string]metadata.MD{
		"no metadata":  nil,
		"no trace":     metadata.Pairs("x-other", "1"),
		"not sampled":  metadata.Pairs("traceparent", "00-"+traceID+"-"+parentID+"-00"),
		"a broken one": metadata.Pairs("traceparent", "garbage"),
	} {
		if res := call(md); len(res.GetSpans()) != 0 || res.GetContent() != "done" {
			t.Errorf("%s: %d bytes of spans, content %q; want none and the result", name, len(res.GetSpans()), res.GetContent())
		}
	}
}
