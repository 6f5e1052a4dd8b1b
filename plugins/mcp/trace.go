package mcp

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// injectTraceContext puts the W3C trace context of ctx's span into a
// request's _meta (traceparent, tracestate), as the MCP specification
// (SEP-414) and the OpenTelemetry MCP conventions describe, so that the
// server's spans join the run's trace. Without a span (telemetry off)
// nothing is added.
func injectTraceContext(ctx context.Context, meta map[string]any) {
	if meta == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, MetaCarrier(meta))
}

// MetaCarrier is an MCP request's _meta as an OpenTelemetry text map
// carrier: string values only. `kernel mcp serve` extracts its clients'
// trace context through it.
type MetaCarrier map[string]any

// Get returns the string value of key, or "".
func (c MetaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

// Set sets key.
func (c MetaCarrier) Set(key, value string) { c[key] = value }

// Keys lists the keys.
func (c MetaCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}
