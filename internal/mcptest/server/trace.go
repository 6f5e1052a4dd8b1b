package main

import (
	"context"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// tracing exports a span per tools/call to the OTLP/HTTP endpoint in
// OTEL_EXPORTER_OTLP_ENDPOINT, continuing the trace context the client put
// in the request's _meta (traceparent), as an MCP server instrumented
// with OpenTelemetry does. Without the variable it adds nothing.
func tracing(s *mcp.Server) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return
	}
	exp, err := otlptracehttp.New(context.Background())
	if err != nil {
		record("otlp exporter: %v", err)
		return
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("mcp-testserver"))))
	tracer := tp.Tracer("mcp-testserver")
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
			if method != "tools/call" || !ok {
				return next(ctx, method, req)
			}
			carrier := propagation.MapCarrier{}
			for k, v := range p.GetMeta() {
				if s, ok := v.(string); ok {
					carrier[k] = s
				}
			}
			ctx = propagation.TraceContext{}.Extract(ctx, carrier)
			ctx, span := tracer.Start(ctx, "tools/call "+p.Name, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(semconv.McpMethodNameKey.String(method), semconv.GenAIToolName(p.Name)))
			res, err := next(ctx, method, req)
			span.End() // exported at once (a syncer): the process may be killed next
			return res, err
		}
	})
}
