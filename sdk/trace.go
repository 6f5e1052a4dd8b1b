package sdk

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// maxSpans caps the spans one call sends back; the host cuts again.
const maxSpans = 256

// StartSpan starts a span named name as a child of the span in ctx: in a
// tool's handler, that is the call's span, which the SDK started from the
// host's trace context, and the span goes back to the host with the
// result and into the run's trace. It must end before the handler returns
// to be sent. Without a trace (the host is not tracing) the span records
// nothing and costs next to nothing.
func StartSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(scope).Start(ctx, name, opts...)
}

// scope is the instrumentation scope of the SDK's spans.
const scope = "github.com/agentkernel/agentkernel/sdk"

// tracing records the spans of the calls whose gRPC metadata carries a
// sampled W3C traceparent, and encodes each call's spans for the result.
// Why: RATIONALE.md, "Plugin spans travel back over the plugin's gRPC
// connection".
type tracing struct {
	once sync.Once
	tp   *sdktrace.TracerProvider
	exp  *otlptrace.Exporter
	col  *collector
}

// start starts the call's span from the trace context in ctx's incoming
// metadata. It returns ctx unchanged and a nil sink when there is none.
func (tr *tracing) start(ctx context.Context, tool string) (context.Context, *sink) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || len(md.Get("traceparent")) == 0 {
		return ctx, nil
	}
	parent := propagation.TraceContext{}.Extract(ctx, MetadataCarrier(md))
	if !trace.SpanContextFromContext(parent).IsSampled() {
		return ctx, nil
	}
	tr.once.Do(tr.init)
	s := &sink{}
	ctx = context.WithValue(trace.ContextWithRemoteSpanContext(ctx, trace.SpanContextFromContext(parent)), sinkKey{}, s)
	ctx, s.span = tr.tp.Tracer(scope).Start(ctx, tool, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.RPCSystemNameKey.String("grpc"), semconv.RPCMethod("agentkernel.plugin.v1.Tools/Call"),
		semconv.GenAIOperationNameKey.String("execute_tool"), semconv.GenAIToolName(tool)))
	return ctx, s
}

func (tr *tracing) init() {
	tr.col = &collector{byID: map[trace.SpanID]*sink{}}
	tr.exp, _ = otlptrace.New(context.Background(), encoder{}) // Start of encoder cannot fail
	tr.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tr.col), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
}

// finish ends the call's span and returns its spans as OTLP TracesData.
func (tr *tracing) finish(s *sink, failed bool) []byte {
	if s == nil {
		return nil
	}
	if failed {
		s.span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
	}
	s.span.End()
	s.mu.Lock()
	spans := s.spans
	s.spans = nil
	s.mu.Unlock()
	if len(spans) == 0 {
		return nil
	}
	ctx := context.WithValue(context.Background(), sinkKey{}, s)
	if err := tr.exp.ExportSpans(ctx, spans); err != nil {
		return nil
	}
	return s.encoded
}

type sinkKey struct{}

// sink collects the ended spans of one call.
type sink struct {
	span    trace.Span
	mu      sync.Mutex
	spans   []sdktrace.ReadOnlySpan
	encoded []byte
}

// collector routes each ended span to the sink of the call it was started
// in (the sink is in the context it started from).
type collector struct {
	mu   sync.Mutex
	byID map[trace.SpanID]*sink
}

func (c *collector) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	if k, ok := parent.Value(sinkKey{}).(*sink); ok {
		c.mu.Lock()
		c.byID[s.SpanContext().SpanID()] = k
		c.mu.Unlock()
	}
}

func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	k := c.byID[s.SpanContext().SpanID()]
	delete(c.byID, s.SpanContext().SpanID())
	c.mu.Unlock()
	if k == nil {
		return
	}
	k.mu.Lock()
	if len(k.spans) < maxSpans {
		k.spans = append(k.spans, s)
	}
	k.mu.Unlock()
}

func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

// encoder is an OTLP client that encodes instead of sending: the spans go
// back with the result.
type encoder struct{}

func (encoder) Start(context.Context) error { return nil }
func (encoder) Stop(context.Context) error  { return nil }
func (encoder) UploadTraces(ctx context.Context, rs []*tracepb.ResourceSpans) error {
	s, _ := ctx.Value(sinkKey{}).(*sink)
	if s == nil {
		return nil
	}
	b, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: rs})
	if err != nil {
		return err
	}
	s.encoded = b
	return nil
}

// MetadataCarrier is gRPC metadata as an OpenTelemetry text map carrier:
// the host injects a call's W3C trace context (traceparent, tracestate)
// into the call's metadata through it, and the SDK extracts it.
type MetadataCarrier metadata.MD

// Get returns the first value of key, or "".
func (c MetadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set sets key to value.
func (c MetadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

// Keys lists the keys.
func (c MetadataCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}
