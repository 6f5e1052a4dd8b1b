package kernel

import (
	"context"
	"fmt"
	"time"
)

// genCall says how callModel runs a generation other than the turn's own
// (the compaction summary). The zero value is the turn's: the configured
// model then the fallbacks, streamed to the run's delta sink, an empty
// answer accounted as a generation.
type genCall struct {
	models  []string       // the models in order
	sink    func(Delta)    // where the stream goes
	account func(Response) // how a retried empty answer is paid for
	// held, when set, is the turn's held stream: its sink, reset at each
	// attempt.
	held *heldSink
}

// modelCall is one generation on its way through the models: callModel's
// state across models and attempts.
type modelCall struct {
	r    *run
	req  Request
	g    genCall
	sink func(Delta)
	n    int // models to try
	// total counts the calls made over every model; last is the failure
	// of the last one that failed with a class.
	total     int
	lastErr   error
	lastClass failureClass
}

// model is the i-th model to try: the configured one, then the
// fallbacks, or genCall's list.
func (mc *modelCall) model(i int) string {
	if mc.g.models != nil {
		return mc.g.models[i]
	}
	if i == 0 {
		return mc.r.k.cfg.Model
	}
	return mc.r.k.cfg.Fallbacks[i-1]
}

// callModel makes one generation happen: it calls the provider, retries
// what may succeed after a wait, moves on to the fallback models when the
// current one is unavailable or keeps failing, and retries an empty
// generation once. The response's message records the model that answered.
//
// It is two loops: over the models here, and over one model's attempts in
// tryModel, each attempt's outcome a verdict (attempt).
func (r *run) callModel(ctx context.Context, req Request, g genCall) (Response, error) {
	mc := modelCall{r: r, req: req, g: g, sink: r.deltaFn, n: 1 + len(r.k.cfg.Fallbacks)}
	if g.models != nil {
		mc.n = len(g.models)
	}
	if g.sink != nil {
		mc.sink = g.sink
	}
	if g.held != nil {
		mc.sink = g.held.sink
	}
	for i := range mc.n {
		resp, err, next := mc.tryModel(ctx, i)
		if !next {
			return resp, err
		}
	}
	return Response{}, &ModelCallError{Attempts: mc.total, Later: mc.lastClass.retry, Cause: mc.lastClass.cause, Err: mc.lastErr}
}

// pay accounts an answer that was paid for but is not the generation (a
// retried empty one): as the turn's generation, unless genCall says how.
// (A method, not a func field: a method value in the struct would cost a
// heap allocation per generation.)
func (mc *modelCall) pay(resp Response) {
	if mc.g.account != nil {
		mc.g.account(resp)
		return
	}
	mc.r.accountGen(resp)
}

// attemptVerdict is what one attempt leaves the model's loop to do.
type attemptVerdict uint8

const (
	answered  attemptVerdict = iota // the response is the generation
	again                           // call again at once; not counted against MaxAttempts
	retry                           // call again after the delay
	nextModel                       // give up on this model; the next one is tried
	giveUp                          // the generation failed with the error
)

// outcome is one attempt's verdict and what goes with it.
type outcome struct {
	verdict attemptVerdict
	resp    Response
	err     error
	delay   time.Duration
	// streamed is what a failed attempt had streamed (ProviderRetry.Superseded).
	streamed int
}

// modelTry is the state of one model's attempts.
type modelTry struct {
	model        string
	p            proto
	req          Request // req as sent to this model (a text-protocol request)
	emptyRetried bool
}

// tryModel runs the attempts of the i-th model until one answers, the
// model is given up (next: try the next one) or the generation fails.
func (mc *modelCall) tryModel(ctx context.Context, i int) (resp Response, err error, next bool) {
	r := mc.r
	m := modelTry{model: mc.model(i)}
	mc.req.Model = m.model
	// The turn's generations follow the model's tool protocol; the others
	// (summaries) offer no tools and read plain text.
	m.p, m.req = proto{native: true}, mc.req
	if mc.g.models == nil {
		if m.p = r.protoFor(m.model); !m.p.native {
			m.req = textRequest(mc.req, m.p.codec)
		}
	}
	for n := 1; ; {
		a := mc.attempt(ctx, &m, n, i+1 < mc.n)
		switch a.verdict {
		case answered:
			return a.resp, nil, false
		case again:
		case retry:
			if serr := r.k.retry.Sleep(ctx, a.delay); serr != nil {
				return Response{}, serr, false
			}
			n++
		case nextModel:
			r.emitRetry(1, 0, mc.lastClass.cause, m.model, mc.model(i+1), a.streamed, mc.lastErr)
			return Response{}, nil, true
		default:
			return Response{}, a.err, false
		}
	}
}

// attempt makes call number n to m's model and decides what follows;
// more says whether another model is left to try.
func (mc *modelCall) attempt(ctx context.Context, m *modelTry, n int, more bool) outcome {
	r, pol := mc.r, mc.r.k.retry
	mc.total++
	if mc.g.held != nil {
		mc.g.held.reset()
	}
	resp, streamed, switched, err := r.streamProto(ctx, m.req, mc.sink, m.p, mc.req.Tools)
	if switched {
		r.switchToText(m.model, m.p.codec, "the model wrote its tool calls as text (the server ignored the tools field)")
	}
	if err == nil && !isEmpty(&resp.Message) {
		resp.Message.Model = m.model
		return outcome{verdict: answered, resp: resp}
	}
	if err != nil && m.p.native && m.p.codec != nil && len(mc.req.Tools) > 0 && refusesTools(err) {
		// auto: the server refuses the tools field for this model.
		r.switchToText(m.model, m.p.codec, "the server refused native tool calling ("+err.Error()+")")
		m.p = proto{codec: m.p.codec}
		m.req = textRequest(mc.req, m.p.codec)
		return outcome{verdict: again}
	}
	if err == nil { // empty: ask once more, at once
		mc.pay(resp) // the empty answer was paid for
		if !m.emptyRetried && r.retries < pol.Budget {
			m.emptyRetried = true
			r.retries++
			r.emitRetry(n+1, 0, "empty_response", m.model, "", streamed, ErrEmptyResponse)
			return outcome{verdict: again}
		}
		return outcome{verdict: giveUp, err: ErrEmptyResponse}
	}
	if ctx.Err() != nil {
		return outcome{verdict: giveUp, err: err}
	}
	cls := classifyFailure(err)
	mc.lastErr, mc.lastClass = err, cls
	if !cls.retry {
		if cls.missing && more {
			return outcome{verdict: nextModel, streamed: streamed}
		}
		if cls.cause == CodeToolsUnsupported {
			err = fmt.Errorf("%s does not take native tool calls here; set model.tool_protocol to auto or text (docs/providers.md): %w", m.model, err)
		}
		return outcome{verdict: giveUp, err: &ModelCallError{Attempts: mc.total, Cause: cls.cause, Err: err}}
	}
	delay := pol.backoff(n)
	if ra := retryAfterOf(err); ra > 0 {
		if ra > pol.MaxRetryAfter {
			return outcome{verdict: giveUp, err: &ModelCallError{Attempts: mc.total, Later: true, Cause: cls.cause,
				Err: fmt.Errorf("the server asks to wait %s, more than the %s allowed: %w", ra.Round(time.Second), pol.MaxRetryAfter, err)}}
		}
		delay = max(delay, ra)
	}
	if n >= pol.MaxAttempts || r.retries >= pol.Budget {
		if more {
			return outcome{verdict: nextModel, streamed: streamed}
		}
		return outcome{verdict: giveUp, err: &ModelCallError{Attempts: mc.total, Later: true, Cause: cls.cause, Err: err}}
	}
	r.retries++
	r.emitRetry(n+1, delay, cls.cause, m.model, "", streamed, err)
	return outcome{verdict: retry, delay: delay}
}
