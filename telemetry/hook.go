package telemetry

import (
	"context"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentkernel/agentkernel/kernel"
)

// Hook is the tool-call middleware that puts each call's execute_tool span
// into the context the rest of the pipeline and the tool get: plugin, MCP
// and command hosts propagate it from there. Wire it first (outermost):
// then the span covers the hooks and the policy, and the result it
// records is the one the model reads, after the scrubber.
func (t *Telemetry) Hook(next kernel.Handler) kernel.Handler {
	return kernel.HandlerFunc(func(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
		ro := runOf(ctx)
		var cs *callSpan
		if ro != nil {
			ro.mu.Lock()
			cs = ro.startCall(c.ID(), c.Tool().Name) // announced by tool.started, or an approved call resumed
			ro.mu.Unlock()
			ro.describe(cs, c.Tool())
		} else { // no observed run (a kernel without Observe): a span of the call alone
			cs = &callSpan{start: time.Now()}
			_, cs.span = t.tracer.Start(ctx, operationTool+" "+c.Tool().Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
				semconv.GenAIOperationNameKey.String(operationTool), semconv.GenAIToolName(c.Tool().Name), semconv.GenAIToolCallID(c.ID())))
			defer cs.span.End()
		}
		cs.span.SetAttributes(attrBytesIn.Int(len(c.Args())))
		res, err := next.Handle(trace.ContextWithSpan(ctx, cs.span), c)
		if t.cfg.Content {
			cs.span.SetAttributes(semconv.GenAIToolCallArgumentsKey.String(capped(t.scrub(string(c.Args())))))
			if res.Content != "" {
				cs.span.SetAttributes(semconv.GenAIToolCallResultKey.String(capped(t.scrub(res.Content))))
			}
		}
		if err != nil && ro == nil {
			cs.span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		}
		return res, err
	})
}
