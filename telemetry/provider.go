package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentkernel/agentkernel/kernel"
)

// Provider wraps p so that each generation is a chat span (CLIENT): one
// span across the generation's retries and fallbacks (their events), with
// the request and response models, usage, finish reason and the time to
// the first streamed fragment. The span is in the context of the model
// call, so Transport sends it to the model server as traceparent.
func (t *Telemetry) Provider(p kernel.Provider) kernel.Provider {
	return &tracedProvider{t: t, next: p}
}

type tracedProvider struct {
	t    *Telemetry
	next kernel.Provider
}

func (p *tracedProvider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	t := p.t
	ro := runOf(ctx)
	g, own := p.generation(ctx, ro, req)
	ctx = trace.ContextWithSpan(ctx, g.span)
	start := time.Now()
	var first time.Time
	inner := emit
	if inner == nil {
		inner = func(kernel.Delta) {}
	}
	resp, err := p.next.Stream(ctx, req, func(d kernel.Delta) {
		if first.IsZero() {
			first = time.Now()
		}
		inner(d)
	})
	if err != nil {
		g.span.AddEvent("gen_ai.attempt.failed", trace.WithAttributes(attribute.Int("agentkernel.attempt", g.attempts),
			semconv.ErrorTypeKey.String(errorType(err)), semconv.GenAIRequestModel(req.Model)))
		if own {
			endError(g.span, err, "")
		}
		return resp, err
	}
	if !first.IsZero() {
		g.ttft = first.Sub(start)
	}
	g.resp = &resp
	if own { // a model call outside a generation (compaction): it ends here
		g.span.SetAttributes(semconv.GenAIResponseModel(firstNonEmpty(resp.Model, req.Model)),
			semconv.GenAIUsageInputTokens(int(resp.Usage.InputTokens)), semconv.GenAIUsageOutputTokens(int(resp.Usage.OutputTokens)))
		if resp.FinishReason != "" {
			g.span.SetAttributes(semconv.GenAIResponseFinishReasons(resp.FinishReason))
		}
		g.span.End()
		if m := t.m; m != nil {
			m.generation(g, firstNonEmpty(resp.Model, req.Model), resp.Usage, 0)
		}
	}
	return resp, err
}

// generation returns the span a model call belongs to: the run's
// generation in flight (opened now by its first call), or, for a call no
// model.request announced (the compaction's summary), a span of its own
// under the compaction's span. own says the caller ends it.
func (p *tracedProvider) generation(ctx context.Context, ro *runObs, req kernel.Request) (g *genSpan, own bool) {
	t := p.t
	if ro == nil {
		return p.start(ctx, req, "", nil), true
	}
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if !ro.expected {
		if ro.compact == nil {
			_, ro.compact = t.tracer.Start(trace.ContextWithSpan(ctx, ro.span), spanCompaction, trace.WithSpanKind(trace.SpanKindInternal))
		}
		return p.start(trace.ContextWithSpan(ctx, ro.compact), req, "compaction", nil), true
	}
	if ro.gen == nil {
		ro.gen = p.start(trace.ContextWithSpan(ctx, ro.span), req, "", ro)
	} else if ro.gen.model != req.Model { // a fallback answers for the model that failed
		ro.gen.model = req.Model
		ro.gen.span.SetName(operationChat + " " + req.Model)
		ro.gen.span.SetAttributes(semconv.GenAIRequestModel(req.Model))
	}
	ro.gen.attempts++
	return ro.gen, false
}

// start opens a chat span.
func (p *tracedProvider) start(ctx context.Context, req kernel.Request, purpose string, ro *runObs) *genSpan {
	t := p.t
	attrs := append([]attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(operationChat),
		semconv.GenAIRequestModel(req.Model),
		attrMessages.Int(len(req.Messages)),
		attrToolsOffered.Int(len(req.Tools)),
	}, t.provider()...)
	attrs = append(attrs, t.server...)
	if ro != nil {
		attrs = append(attrs, semconv.GenAIConversationID(ro.info.SessionID))
	}
	if purpose != "" {
		attrs = append(attrs, attrPurpose.String(purpose))
	}
	if t.cfg.Content {
		attrs = append(attrs, semconv.GenAIInputMessagesKey.String(t.messagesJSON(req.Messages, "")))
	}
	g := &genSpan{start: time.Now(), model: req.Model}
	_, g.span = t.tracer.Start(ctx, operationChat+" "+req.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if purpose != "" {
		g.attempts = 1
	}
	return g
}

var _ kernel.Provider = (*tracedProvider)(nil)
