package telemetry

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentkernel/agentkernel/kernel"
)

// runKey is the context key of a run's observer.
type runKey struct{}

// runOf returns the observer of the run ctx belongs to, or nil.
func runOf(ctx context.Context) *runObs {
	ro, _ := ctx.Value(runKey{}).(*runObs)
	return ro
}

// runObs is one observed run: its span, the generation and tool calls in
// flight, and what the metrics need. The kernel calls Event from the
// run's goroutines one at a time; the hook and the provider wrapper run
// beside it, hence the lock.
type runObs struct {
	t     *Telemetry
	info  kernel.RunInfo
	span  trace.Span // invoke_agent; a non-recording span for direct calls
	start time.Time

	mu sync.Mutex
	// gen is the generation in flight: announced by model.request, opened
	// by the first model call, ended by message.completed (or the run's
	// end). Retries and fallbacks are its events.
	gen      *genSpan
	expected bool // a model.request announced the next model call
	compact  trace.Span
	calls    map[string]*callSpan
	output   string
}

// genSpan is a generation's span and what its metrics need.
type genSpan struct {
	span     trace.Span
	start    time.Time
	model    string
	attempts int
	ttft     time.Duration // of the attempt that answered
	resp     *kernel.Response
}

// callSpan is a tool call's span.
type callSpan struct {
	span    trace.Span
	start   time.Time
	name    string
	source  string
	rewrote []string
	blocked []string
	decided bool
}

// Observe is the kernel's Config.Observe: it starts the run's span
// (invoke_agent) and returns the run's context, carrying the span and the
// run's observer. A direct call (kernel mcp serve) gets no run span: its
// tool span continues the caller's trace.
func (t *Telemetry) Observe(ctx context.Context, info kernel.RunInfo) (context.Context, kernel.RunObserver) {
	ro := &runObs{t: t, info: info, start: time.Now(), calls: map[string]*callSpan{}}
	if info.Direct {
		ro.span = trace.SpanFromContext(ctx)
	} else {
		// A named agent's run is named after it; a child's run nests
		// under its caller's execute_tool span through ctx.
		agent := t.cfg.AgentName
		if info.Agent != "" && info.Agent != kernel.DefaultAgentName {
			agent = info.Agent
		}
		attrs := append([]attribute.KeyValue{
			semconv.GenAIOperationNameKey.String(operationInvoke),
			semconv.GenAIAgentName(agent),
			semconv.GenAIConversationID(info.SessionID),
			semconv.GenAIRequestModel(info.Model),
			attrResumed.Bool(info.Resumed),
			attrNewSession.Bool(info.NewSession),
		}, t.provider()...)
		if info.Principal != "" {
			attrs = append(attrs, attrPrincipal.String(info.Principal))
		}
		if p := info.Parent; p != nil {
			attrs = append(attrs, attrParentSession.String(p.SessionID), attrAgentDepth.Int(p.Depth))
		}
		ctx, ro.span = t.tracer.Start(ctx, operationInvoke+" "+agent,
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	}
	return context.WithValue(ctx, runKey{}, ro), ro
}

// Event follows the run's events: spans for tool calls, approvals and
// compactions, events on the spans, and the metrics.
func (ro *runObs) Event(e kernel.Event) {
	t := ro.t
	switch e := e.(type) {
	case kernel.RunStarted:
		if t.cfg.Content && e.Prompt != "" {
			ro.span.SetAttributes(semconv.GenAIInputMessagesKey.String(t.messagesJSON([]kernel.Message{{Role: kernel.RoleUser, Content: e.Prompt}}, "")))
		}
	case kernel.ModelRequest:
		ro.mu.Lock()
		ro.expected = true
		ro.mu.Unlock()
	case kernel.MessageCompleted:
		ro.completed(e)
	case kernel.ProviderRetry:
		ro.retry(e)
	case kernel.ToolStarted:
		ro.mu.Lock()
		ro.startCall(e.CallID, e.Tool)
		ro.mu.Unlock()
	case kernel.PolicyDecided:
		ro.decided(e)
	case kernel.HookRewrote:
		ro.hook(e.CallID, "hook.rewrote", e.Hook, e.What, e.Phase, false)
	case kernel.HookBlocked:
		ro.hook(e.CallID, "hook.blocked", e.Hook, "", e.Phase, true)
	case kernel.HookFailed:
		ro.hook(e.CallID, "hook.failed", e.Hook, "", e.Phase, false)
	case kernel.HookCompleted:
		ro.guardrail(e)
	case kernel.ToolCompleted:
		ro.toolDone(e.CallID, e.Tool, e.Outcome, e.Error, e.Bytes)
	case kernel.ApprovalRequired:
		ro.asked(e.Approval)
	case kernel.ApprovalResolved:
		ro.resolved(e)
	case kernel.ContextCompacted:
		ro.compacted(e)
	case kernel.BudgetWarning:
		ro.span.AddEvent("budget.warning", trace.WithAttributes(attribute.String("agentkernel.budget.id", e.ID)))
	case kernel.BudgetExceeded:
		ro.span.AddEvent("budget.exceeded", trace.WithAttributes(attribute.String("agentkernel.budget.id", e.ID)))
	case kernel.ContextWarning:
		ro.span.AddEvent("context.warning", trace.WithAttributes(attribute.Int("agentkernel.context.used", e.Used), attribute.Int("agentkernel.context.window", e.Window)))
	case kernel.SteerDelivered:
		ro.span.AddEvent("steer.delivered", trace.WithAttributes(attribute.String("agentkernel.steer.id", e.ID)))
	case kernel.RunCompleted:
		ro.output = e.Output
	}
}

// Committed times a store write.
func (ro *runObs) Committed(d time.Duration, err error) {
	if m := ro.t.m; m != nil {
		m.storeCommit.Observe(d.Seconds())
		if err != nil {
			m.storeErrors.Inc()
		}
	}
}

// End closes what the run left open and the run's span.
func (ro *runObs) End(res *kernel.RunResult, err error) {
	t := ro.t
	ro.mu.Lock()
	gen, compact, calls := ro.gen, ro.compact, ro.calls
	ro.gen, ro.compact, ro.calls = nil, nil, map[string]*callSpan{}
	ro.mu.Unlock()
	if gen != nil {
		gen.span.SetAttributes(attrAttempts.Int(gen.attempts))
		endError(gen.span, err, "no answer")
		if m := t.m; m != nil {
			m.generations.WithLabelValues(gen.model, "error").Inc()
		}
	}
	if compact != nil {
		compact.End()
	}
	for _, cs := range calls { // a call the run never finished (a crash of the tool's goroutine cannot happen; cancellation can)
		endError(cs.span, err, "the run ended first")
	}
	if ro.info.Direct {
		return
	}
	reason := kernel.StopError
	if res != nil {
		reason = res.StopReason
		ro.span.SetAttributes(
			attrStopReason.String(string(reason)),
			attrTurns.Int(res.Turns),
			semconv.GenAIUsageInputTokens(int(res.Usage.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(res.Usage.OutputTokens)),
			attrCost.Float64(res.CostUSD),
		)
		if t.cfg.Content && ro.output != "" {
			ro.span.SetAttributes(semconv.GenAIOutputMessagesKey.String(t.messagesJSON([]kernel.Message{{Role: kernel.RoleAssistant, Content: ro.output}}, string(reason))))
		}
	}
	if l := t.cfg.Logger; l != nil {
		l.DebugContext(trace.ContextWithSpan(context.Background(), ro.span), "run ended", "session", ro.info.SessionID,
			"stop_reason", string(reason), "duration", time.Since(ro.start).String())
	}
	if m := t.m; m != nil {
		m.runs.WithLabelValues(string(reason)).Inc()
		m.runDuration.WithLabelValues(string(reason)).Observe(time.Since(ro.start).Seconds())
	}
	if err != nil && reason != kernel.StopCancelled {
		endError(ro.span, err, "")
		return
	}
	ro.span.End()
}

// endError ends span with an error status.
func endError(span trace.Span, err error, fallback string) {
	msg := fallback
	if err != nil {
		msg = err.Error()
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
	} else {
		span.SetAttributes(semconv.ErrorTypeKey.String("_OTHER"))
	}
	span.SetStatus(codes.Error, msg)
	span.End()
}

// errorType is error.type for err: the tool error's code, the provider's
// status, or _OTHER.
func errorType(err error) string {
	var te *kernel.ToolError
	if errors.As(err, &te) && te.Code != "" {
		return te.Code
	}
	var pe *kernel.ProviderError
	if errors.As(err, &pe) {
		if pe.StatusCode != 0 {
			return strconv.Itoa(pe.StatusCode)
		}
		if pe.Code != "" {
			return pe.Code
		}
	}
	var mc *kernel.ModelCallError
	if errors.As(err, &mc) && mc.Cause != "" {
		return mc.Cause
	}
	return "_OTHER"
}

// startCall opens the span of a tool call (a child of the run's span) as
// it enters the pipeline. ro.mu is held.
func (ro *runObs) startCall(id, name string) *callSpan {
	if cs, ok := ro.calls[id]; ok {
		return cs
	}
	t := ro.t
	cs := &callSpan{start: time.Now(), name: name}
	ctx := trace.ContextWithSpan(context.Background(), ro.span)
	_, cs.span = t.tracer.Start(ctx, operationTool+" "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		semconv.GenAIOperationNameKey.String(operationTool),
		semconv.GenAIToolName(name),
		semconv.GenAIToolCallID(id),
		semconv.GenAIToolType(toolTypeFunction),
	))
	ro.calls[id] = cs
	if spec, ok := t.spec(name); ok {
		ro.describe(cs, spec)
	}
	return cs
}

// describe sets the attributes a call's spec gives.
func (ro *runObs) describe(cs *callSpan, spec kernel.ToolSpec) {
	if cs.source != "" {
		return
	}
	cs.source = toolSource(spec.Source)
	attrs := []attribute.KeyValue{attrSource.String(cs.source), attrOrigin.String(spec.Source), attrTier.String(string(spec.Tier))}
	if cs.source == "mcp" {
		attrs = append(attrs, semconv.GenAIToolTypeKey.String(toolTypeExtension))
	}
	if spec.Description != "" {
		attrs = append(attrs, semconv.GenAIToolDescription(spec.Description))
	}
	if f := ro.t.cfg.Layers; f != nil {
		if l := f(spec.Name, spec.Source); len(l) > 0 {
			attrs = append(attrs, attrLayers.StringSlice(l))
		}
	}
	cs.span.SetAttributes(attrs...)
}

func (ro *runObs) decided(e kernel.PolicyDecided) {
	d := e.Decision
	ro.mu.Lock()
	cs := ro.calls[e.CallID]
	if cs != nil {
		cs.decided = true
	}
	ro.mu.Unlock()
	if cs != nil {
		attrs := []attribute.KeyValue{attrEffect.String(string(d.Effect)), attrDecisionID.String(d.ID), attrDefault.Bool(d.Default),
			attrEvalSeconds.Float64(d.EvalTime.Seconds())}
		if len(d.Rules) > 0 {
			attrs = append(attrs, attrRules.StringSlice(d.Rules))
		}
		if d.Revision != "" {
			attrs = append(attrs, attrRevision.String(d.Revision))
		}
		if len(d.WouldDeny) > 0 {
			attrs = append(attrs, attrWouldDeny.StringSlice(d.WouldDeny))
		}
		if len(d.WouldAsk) > 0 {
			attrs = append(attrs, attrWouldAsk.StringSlice(d.WouldAsk))
		}
		cs.span.SetAttributes(attrs...)
	}
	if m := ro.t.m; m != nil {
		m.decision(d)
	}
}

func (ro *runObs) hook(callID, event, hook, what, phase string, blocked bool) {
	if !kernel.HookPoint(phase).Lifecycle() {
		if m := ro.t.m; m != nil { // a lifecycle point's hooks count in guardrail
			m.hookRuns.WithLabelValues(phase, map[string]string{"hook.rewrote": "changed", "hook.blocked": "blocked", "hook.failed": "failed"}[event]).Inc()
		}
	}
	ro.mu.Lock()
	cs := ro.calls[callID]
	if cs != nil {
		label := hook + ":" + phase
		if what != "" {
			label += ":" + what
		}
		switch {
		case blocked:
			cs.blocked = append(cs.blocked, label)
			cs.span.SetAttributes(attrHooksBlocked.StringSlice(cs.blocked))
		case event == "hook.rewrote":
			cs.rewrote = append(cs.rewrote, label)
			cs.span.SetAttributes(attrHooksRewrote.StringSlice(cs.rewrote))
		}
	}
	ro.mu.Unlock()
	if cs != nil {
		cs.span.AddEvent(event, trace.WithAttributes(attribute.String("agentkernel.hook", hook), attribute.String("agentkernel.hook.phase", phase)))
	}
}

// guardrail records a hook at a lifecycle point as a guardrail span of
// its run: under the generation's chat span when one is in flight (a
// concurrent guardrail, an after_model hook), else under invoke_agent.
func (ro *runObs) guardrail(e kernel.HookCompleted) {
	t := ro.t
	start := time.Now().Add(-e.Duration)
	ro.mu.Lock()
	parent := ro.span
	if g := ro.gen; g != nil && (e.Phase == string(kernel.PointBeforeModel) || e.Phase == string(kernel.PointAfterModel)) {
		parent = g.span
	}
	ro.mu.Unlock()
	_, span := t.tracer.Start(trace.ContextWithSpan(context.Background(), parent), spanGuardrail+" "+e.Hook,
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
			attrHookName.String(e.Hook), attrHookPoint.String(e.Phase), attrHookOutcome.String(e.Outcome),
			attrHookConc.Bool(e.Concurrent), attrTurns.Int(e.Turn)))
	if e.Outcome == "failed" {
		span.SetStatus(codes.Error, "the hook failed")
	}
	span.End()
	if m := t.m; m != nil {
		m.hookRuns.WithLabelValues(e.Phase, e.Outcome).Inc()
		m.hookDuration.WithLabelValues(e.Phase).Observe(e.Duration.Seconds())
	}
}

// toolDone ends a call's span with its outcome.
func (ro *runObs) toolDone(id, name string, outcome kernel.Outcome, errText string, bytes int) {
	ro.mu.Lock()
	cs := ro.calls[id]
	if cs == nil { // failed before the pipeline (unknown tool, bad arguments): it still gets a span
		cs = ro.startCall(id, name)
	}
	delete(ro.calls, id)
	ro.mu.Unlock()
	cs.span.SetAttributes(attrOutcome.String(string(outcome)), attrBytesOut.Int(bytes))
	d := time.Since(cs.start)
	if l := ro.t.cfg.Logger; l != nil {
		l.DebugContext(trace.ContextWithSpan(context.Background(), cs.span), "tool call ended", "tool", name, "call_id", id,
			"outcome", string(outcome), "duration", d.String())
	}
	if m := ro.t.m; m != nil {
		src := cs.source
		if src == "" {
			src = "unknown"
		}
		m.tool(name, src, outcome, d)
	}
	switch outcome {
	case kernel.OutcomeOK, kernel.OutcomeNeedsReview:
		cs.span.End()
	default:
		cs.span.SetAttributes(semconv.ErrorTypeKey.String(string(outcome)))
		cs.span.SetStatus(codes.Error, errText)
		cs.span.End()
	}
}

// asked ends the span of a call policy sent to a human, and counts the
// approval pending.
func (ro *runObs) asked(a kernel.Approval) {
	ro.toolDone(a.Call.ID, a.Call.Name, kernel.OutcomeNeedsReview, "", 0)
	ro.t.pend.add(a.ID, a.Created, ro.span.SpanContext())
}

// resolved adds the span of an approval's wait: from the ask to the
// decision, in the trace of the run that continues, linked to the one
// that asked when this process saw it.
func (ro *runObs) resolved(e kernel.ApprovalResolved) {
	t := ro.t
	start := time.Now()
	if p := ro.info.Pending; p != nil && p.ID == e.ApprovalID && !p.Created.IsZero() {
		start = p.Created
	}
	asker, known := t.pend.remove(e.ApprovalID)
	if known && !asker.created.IsZero() {
		start = asker.created
	}
	decision := "rejected"
	switch {
	case e.Approved:
		decision = "approved"
	case e.Expired:
		decision = "expired"
	}
	wait := time.Since(start)
	opts := []trace.SpanStartOption{trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attrApprovalID.String(e.ApprovalID), semconv.GenAIToolName(e.Tool), semconv.GenAIToolCallID(e.CallID),
		attrDecision.String(decision), attrWait.Float64(wait.Seconds()),
	)}
	if e.By != "" {
		opts = append(opts, trace.WithAttributes(attrDecidedBy.String(e.By)))
	}
	if known && asker.span.IsValid() && asker.span.TraceID() != ro.span.SpanContext().TraceID() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: asker.span}))
	}
	_, span := t.tracer.Start(trace.ContextWithSpan(context.Background(), ro.span), spanApprovalWait+" "+e.Tool, opts...)
	span.End()
	if m := t.m; m != nil {
		m.approvalWait.WithLabelValues(decision).Observe(wait.Seconds())
	}
}

// compacted closes the compaction span (opened by the summariser's model
// call) or records one of the event's duration.
func (ro *runObs) compacted(e kernel.ContextCompacted) {
	ro.mu.Lock()
	span := ro.compact
	ro.compact = nil
	ro.mu.Unlock()
	if span == nil {
		start := time.Now().Add(-e.Duration)
		_, span = ro.t.tracer.Start(trace.ContextWithSpan(context.Background(), ro.span), spanCompaction,
			trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal))
	}
	span.SetAttributes(attrCompactKind.String(e.Kind), attrDropped.Int(e.Dropped),
		attrTokensBefore.Int(e.TokensBefore), attrTokensAfter.Int(e.TokensAfter))
	if e.Model != "" {
		span.SetAttributes(semconv.GenAIRequestModel(e.Model), semconv.GenAIUsageInputTokens(int(e.Usage.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(e.Usage.OutputTokens)), attrCost.Float64(e.CostUSD))
	}
	span.End()
	if m := ro.t.m; m != nil && e.Model != "" {
		m.account(e.Model, e.Usage, e.CostUSD)
	}
}

// retry records a retry or a fallback on the generation's span.
func (ro *runObs) retry(e kernel.ProviderRetry) {
	ro.mu.Lock()
	g := ro.gen
	ro.mu.Unlock()
	name := "gen_ai.retry"
	attrs := []attribute.KeyValue{attribute.Int("agentkernel.retry.attempt", e.Attempt), attribute.String("agentkernel.retry.cause", e.Cause),
		attribute.Float64("agentkernel.retry.delay_seconds", e.Delay.Seconds()), semconv.GenAIRequestModel(e.Model)}
	if e.Fallback != "" {
		name = "gen_ai.fallback"
		attrs = append(attrs, attribute.String("agentkernel.fallback.model", e.Fallback))
	}
	if g != nil {
		g.span.AddEvent(name, trace.WithAttributes(attrs...))
	}
	if m := ro.t.m; m != nil {
		if e.Fallback != "" {
			m.fallbacks.WithLabelValues(e.Model, e.Fallback).Inc()
		} else {
			m.retries.WithLabelValues(e.Model, e.Cause).Inc()
		}
	}
}

// completed ends the generation's span with the stored answer: usage,
// cost, finish reason, and the content when it is recorded.
func (ro *runObs) completed(e kernel.MessageCompleted) {
	t := ro.t
	ro.mu.Lock()
	g := ro.gen
	ro.gen, ro.expected = nil, false
	ro.mu.Unlock()
	if g == nil { // an answer the kernel wrote (a rejection): no model call
		return
	}
	model := e.Message.Model
	if model == "" {
		model = g.model
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIResponseModel(model),
		semconv.GenAIUsageInputTokens(int(e.Usage.InputTokens)),
		semconv.GenAIUsageOutputTokens(int(e.Usage.OutputTokens)),
		attrCost.Float64(e.CostUSD),
		attrAttempts.Int(g.attempts),
	}
	if e.Usage.CachedInputTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(e.Usage.CachedInputTokens)))
	}
	if e.Usage.CacheWriteTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheCreationInputTokens(int(e.Usage.CacheWriteTokens)))
	}
	if e.Usage.ReasoningTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageReasoningOutputTokens(int(e.Usage.ReasoningTokens)))
	}
	finish := ""
	if g.resp != nil {
		finish = g.resp.FinishReason
		if finish != "" {
			attrs = append(attrs, semconv.GenAIResponseFinishReasons(finish))
		}
	}
	if g.ttft > 0 {
		attrs = append(attrs, semconv.GenAIResponseTimeToFirstChunk(g.ttft.Seconds()))
	}
	if t.cfg.Content {
		attrs = append(attrs, semconv.GenAIOutputMessagesKey.String(t.messagesJSON([]kernel.Message{e.Message}, finish)))
	}
	g.span.SetAttributes(attrs...)
	g.span.End()
	if m := t.m; m != nil {
		m.generation(g, model, e.Usage, e.CostUSD)
	}
}

var _ kernel.RunObserver = (*runObs)(nil)
