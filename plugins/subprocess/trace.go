package subprocess

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/agentkernel/agentkernel/sdk"
)

// withTraceContext adds the W3C trace context of ctx's span (traceparent,
// tracestate) to the call's outgoing gRPC metadata, so that the plugin's
// spans continue the run's trace; sdk starts a span from it. A
// context without a span (telemetry off) is returned as it is.
func withTraceContext(ctx context.Context) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	propagation.TraceContext{}.Inject(ctx, sdk.MetadataCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}
