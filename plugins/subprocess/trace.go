package subprocess

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/agentkernel/agentkernel/sdk"
)

// withDeadline adds the call's deadline, as an absolute time, to its
// outgoing gRPC metadata (sdk.DeadlineMetadata). grpc sends the deadline
// as a duration the plugin counts from when it reads it, later than the
// host counted from on a loaded machine; the host's cancellation at its
// deadline could then reach the plugin before its own deadline, and the
// plugin would take it for a cancellation. With the absolute deadline the
// plugin tells one from the other (RATIONALE.md, "A deadline is not a
// cancel").
func withDeadline(ctx context.Context) context.Context {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx
	}
	// Rounded up: the plugin's deadline is never before the kernel's, so a
	// plugin that answers when its own deadline ends answers late, not a
	// moment before the kernel's timer (UnixMilli truncates: up to 1 ms early).
	ms := dl.UnixMilli()
	if dl.UnixNano()%int64(time.Millisecond) != 0 {
		ms++
	}
	return metadata.AppendToOutgoingContext(ctx, sdk.DeadlineMetadata, strconv.FormatInt(ms, 10))
}

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
