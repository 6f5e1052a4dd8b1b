package telemetry

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Limits on the spans a plugin sends back with a result: it is not
// trusted, so what it sends is cut to size and kept to the call's trace.
const (
	MaxPluginSpanBytes = 1 << 20
	maxPluginSpans     = 256
	maxSpanAttrs       = 64
	maxSpanEvents      = 32
	maxAttrValue       = 4 << 10
	maxName            = 256
)

// ImportSpans takes the spans a plugin recorded for one call (OTLP
// TracesData, as protobuf: what sdk sends back beside a result)
// and hands them to the exporter with the kernel's own, under a resource
// naming the plugin. Only spans of ctx's trace are kept, and only those
// whose parent is ctx's span (the call's execute_tool span) or another
// span of the batch: a plugin cannot write into another trace. The rest is
// dropped, and the error says how many.
// Why: RATIONALE.md, "Plugin spans travel back over the plugin's gRPC
// connection".
func (t *Telemetry) ImportSpans(ctx context.Context, plugin string, data []byte) error {
	if t.tp == nil || len(data) == 0 {
		return nil
	}
	parent := trace.SpanContextFromContext(ctx)
	if !parent.IsValid() || !parent.IsSampled() {
		return nil
	}
	if len(data) > MaxPluginSpanBytes {
		return fmt.Errorf("plugin %s sent %d bytes of spans, more than %d: dropped", plugin, len(data), MaxPluginSpanBytes)
	}
	var td tracepb.TracesData
	if err := proto.Unmarshal(data, &td); err != nil {
		return fmt.Errorf("plugin %s sent spans that do not decode as OTLP TracesData: %w", plugin, err)
	}
	res, err := resource.Merge(t.res, resource.NewSchemaless(
		semconv.ServiceName("agentkernel-plugin-"+plugin), attrPlugin.String(plugin)))
	if err != nil {
		res = t.res
	}
	var spans []*tracepb.Span
	scopes := map[*tracepb.Span]*commonpb.InstrumentationScope{}
	for _, rs := range td.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				spans = append(spans, s)
				scopes[s] = ss.GetScope()
			}
		}
	}
	ids := map[trace.SpanID]bool{parent.SpanID(): true}
	for _, s := range spans {
		if id, ok := spanID(s.GetSpanId()); ok {
			ids[id] = true
		}
	}
	dropped := 0
	kept := 0
	for _, s := range spans {
		stub, ok := t.stub(s, parent, ids)
		if !ok || kept >= maxPluginSpans {
			dropped++
			continue
		}
		stub.Resource = res
		stub.InstrumentationScope = instrumentation.Scope{Name: cut(scopes[s].GetName(), maxName), Version: cut(scopes[s].GetVersion(), maxName)}
		ro := stub.Snapshot()
		for _, p := range t.procs {
			p.OnEnd(ro)
		}
		kept++
	}
	if dropped > 0 {
		return fmt.Errorf("plugin %s: %d of its %d spans dropped (another trace, an unknown parent, bad ids or times, or more than %d)", plugin, dropped, len(spans), maxPluginSpans)
	}
	return nil
}

// stub converts one OTLP span of the call's trace.
func (t *Telemetry) stub(s *tracepb.Span, parent trace.SpanContext, ids map[trace.SpanID]bool) (tracetest.SpanStub, bool) {
	var tid trace.TraceID
	if len(s.GetTraceId()) != len(tid) {
		return tracetest.SpanStub{}, false
	}
	copy(tid[:], s.GetTraceId())
	sid, ok := spanID(s.GetSpanId())
	pid, pok := spanID(s.GetParentSpanId())
	if tid != parent.TraceID() || !ok || sid == parent.SpanID() || !pok || !ids[pid] {
		return tracetest.SpanStub{}, false
	}
	start, end := time.Unix(0, int64(s.GetStartTimeUnixNano())), time.Unix(0, int64(s.GetEndTimeUnixNano()))
	if s.GetStartTimeUnixNano() == 0 || end.Before(start) {
		return tracetest.SpanStub{}, false
	}
	stub := tracetest.SpanStub{
		Name:        cut(s.GetName(), maxName),
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}),
		Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid, TraceFlags: trace.FlagsSampled}),
		SpanKind:    trace.SpanKind(s.GetKind()),
		StartTime:   start,
		EndTime:     end,
		Attributes:  attrsOf(s.GetAttributes()),
	}
	if stub.SpanKind < trace.SpanKindInternal || stub.SpanKind > trace.SpanKindConsumer {
		stub.SpanKind = trace.SpanKindInternal
	}
	for i, e := range s.GetEvents() {
		if i >= maxSpanEvents {
			stub.DroppedEvents++
			continue
		}
		stub.Events = append(stub.Events, sdktrace.Event{Name: cut(e.GetName(), maxName), Time: time.Unix(0, int64(e.GetTimeUnixNano())), Attributes: attrsOf(e.GetAttributes())})
	}
	switch s.GetStatus().GetCode() {
	case tracepb.Status_STATUS_CODE_ERROR:
		stub.Status = sdktrace.Status{Code: codes.Error, Description: cut(s.GetStatus().GetMessage(), maxAttrValue)}
	case tracepb.Status_STATUS_CODE_OK:
		stub.Status = sdktrace.Status{Code: codes.Ok}
	}
	return stub, true
}

func spanID(b []byte) (trace.SpanID, bool) {
	var id trace.SpanID
	if len(b) != len(id) {
		return id, false
	}
	copy(id[:], b)
	return id, id.IsValid()
}

// attrsOf converts OTLP attributes: scalars and arrays of one scalar
// type; anything else is shown as its text.
func attrsOf(kvs []*commonpb.KeyValue) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, kv := range kvs {
		if len(out) >= maxSpanAttrs {
			break
		}
		k := attribute.Key(cut(kv.GetKey(), maxName))
		if k == "" {
			continue
		}
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out = append(out, k.String(cut(v.StringValue, maxAttrValue)))
		case *commonpb.AnyValue_BoolValue:
			out = append(out, k.Bool(v.BoolValue))
		case *commonpb.AnyValue_IntValue:
			out = append(out, k.Int64(v.IntValue))
		case *commonpb.AnyValue_DoubleValue:
			out = append(out, k.Float64(v.DoubleValue))
		case *commonpb.AnyValue_ArrayValue:
			var ss []string
			for _, x := range v.ArrayValue.GetValues() {
				if len(ss) >= maxSpanAttrs {
					break
				}
				ss = append(ss, cut(anyText(x), maxAttrValue))
			}
			out = append(out, k.StringSlice(ss))
		}
	}
	return out
}

func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return ""
}

// cut shortens s to max bytes on a rune boundary.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
