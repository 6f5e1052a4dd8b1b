package builtin

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceParent is the W3C traceparent of ctx's span, "" without one.
func traceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// traceEnv is what run_command's program gets besides its allowlist:
// TRACEPARENT, the call's span, when the kernel passes it (never the
// kernel's own variable of that name).
func (w *workspace) traceEnv(ctx context.Context) []string {
	if !w.traceParent {
		return nil
	}
	if tp := traceParent(ctx); tp != "" {
		return []string{TraceParentEnv + "=" + tp}
	}
	return nil
}
