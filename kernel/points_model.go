package kernel

import (
	"context"
	"errors"
	"sync"
)

// heldSink holds a generation's stream back: all of it until the
// after_model hooks have run (all), or what comes before a concurrent
// guardrail has passed. Deltas arrive, and are passed on, on the loop's
// goroutine only; the guardrail's goroutine only sets passed.
type heldSink struct {
	r   *run
	all bool
	buf []Delta

	mu     sync.Mutex
	passed bool
}

func (h *heldSink) sink(d Delta) {
	if h.all {
		return // showAnswer sends the answer as the hooks left it
	}
	h.mu.Lock()
	passed := h.passed
	h.mu.Unlock()
	if !passed {
		h.buf = append(h.buf, d)
		return
	}
	h.flush()
	h.r.onDelta(d)
}

// flush passes on what was held.
func (h *heldSink) flush() {
	for _, d := range h.buf {
		h.r.onDelta(d)
	}
	h.buf = h.buf[:0]
}

// pass lets the stream through from the next delta on.
func (h *heldSink) pass() {
	h.mu.Lock()
	h.passed = true
	h.mu.Unlock()
}

// reset drops what a failed attempt streamed: its text is void.
func (h *heldSink) reset() { h.buf = h.buf[:0] }

// callHeld is callModel with the stream held (see heldSink) and, when
// guard is set, the guardrail running beside the model call: a block or
// a failure of it cancels the call and discards its answer. The guardrail
// runs on a goroutine callHeld owns, stops when ctx or the model's
// failure ends it, and is waited for.
func (r *run) callHeld(ctx context.Context, req Request, guard func(context.Context) (GuardReply, error), all bool) (Response, error) {
	h := &heldSink{r: r, all: all, passed: guard == nil}
	g := genCall{held: h}
	if guard == nil {
		return r.callModel(ctx, req, g)
	}
	mctx, cancelModel := context.WithCancel(ctx)
	defer cancelModel()
	gctx, cancelGuard := context.WithCancel(ctx)
	defer cancelGuard()
	type verdict struct {
		rep GuardReply
		err error
	}
	done := make(chan verdict, 1)
	go func() {
		rep, err := guard(gctx)
		if rep.Block != nil || err != nil {
			cancelModel() // the tripwire
		} else {
			h.pass()
		}
		done <- verdict{rep, err}
	}()
	resp, err := r.callModel(mctx, req, g)
	if err != nil && mctx.Err() == nil {
		cancelGuard() // the model failed on its own: there is no answer to guard
	}
	v := <-done
	r.noteFailed(PointBeforeModel, v.rep.Failed)
	switch {
	case ctx.Err() != nil:
		return Response{}, ctx.Err()
	case v.rep.Block != nil:
		b := *v.rep.Block
		b.Concurrent = true
		r.note(HookNote{Hook: b.Hook, Point: PointBeforeModel, What: NoteBlocked, Reason: b.Reason})
		return Response{}, blockErr(PointBeforeModel, &b)
	case v.err != nil && !(errors.Is(v.err, context.Canceled) && gctx.Err() != nil):
		ge := pointErr(ctx, PointBeforeModel, v.err)
		var g *GuardrailError
		if errors.As(ge, &g) {
			g.Concurrent = true
		}
		return Response{}, ge
	case err != nil:
		return Response{}, err
	}
	h.flush()
	return resp, nil
}

// showAnswer sends a held answer as the after_model hooks left it.
func (r *run) showAnswer(m *Message) {
	if m.Reasoning != "" {
		r.onDelta(Delta{Kind: DeltaReasoning, Text: m.Reasoning})
	}
	if m.Content != "" {
		r.onDelta(Delta{Kind: DeltaText, Text: m.Content})
	}
}

// commitAnswer stores the turn's answer (or a kernel-written message in
// its place) with what the turn's hooks did: their notes and edits on
// it, their context messages before it; after follows it in the step.
func (r *run) commitAnswer(ctx context.Context, m Message, after ...Message) error {
	m.Hooks = r.turnRecord()
	r.openRound(m.ToolCalls, len(r.inject))
	if len(r.inject) == 0 && len(after) == 0 {
		return r.commitMsg(ctx, m, Step{})
	}
	n := len(r.msgs)
	r.msgs = append(r.msgs, r.inject...)
	r.msgs = append(r.msgs, m)
	r.msgs = append(r.msgs, after...)
	r.inject = r.inject[:0]
	return r.commitTail(ctx, n, Step{})
}
