package hooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// One lifecycle point's hooks run in order, each on the input as the
// hooks before it left it: a rewritten prompt, context and edits in the
// request, a replaced answer. The first block ends the point. A hook that
// fails steps aside (fail_open: its name is in the reply's Failed) or
// stops the run (fail_closed: a *kernel.GuardrailError naming it). Every
// run of a hook is a hook.completed event; a block, a change and a
// failure also a hook.blocked, hook.rewrote or hook.failed.

// runHooks runs the hooks of hs that are not concurrent. apply merges a
// reply into the point's reply (and into in); it reports whether the
// point ends there, or why the reply is a failure of the hook.
func (pr pointRun) runHooks(ctx context.Context, in PointInput, failed *[]string, apply func(h *PointHook, rep *Reply) (stop bool, err error)) error {
	for _, h := range pr.hs {
		if h.concurrent {
			continue
		}
		start := time.Now()
		rep, ok, err := h.runOne(ctx, in)
		if !ok {
			continue
		}
		stop := false
		if err == nil {
			stop, err = apply(h, &rep)
		}
		if err != nil {
			ferr := h.failed(ctx, in, err, start)
			pr.record(in, h, "failed", err.Error())
			if ferr != nil {
				return ferr
			}
			*failed = append(*failed, h.name)
			continue
		}
		h.report(in, &rep, start)
		pr.record(in, h, rep.outcome(), rep.Reason)
		if stop {
			return nil
		}
	}
	return nil
}

// report sends the events of a hook's reply.
func (h *PointHook) report(in PointInput, rep *Reply, start time.Time) {
	pi := in.Info()
	p := string(h.point)
	if rep.Decision == Block {
		pi.Emit(kernel.HookBlocked{Hook: h.name, Phase: p, Reason: rep.Reason})
	}
	for _, w := range rep.changes() {
		pi.Emit(kernel.HookRewrote{Hook: h.name, Phase: p, What: w})
	}
	h.completed(in, rep.outcome(), start)
}

// changes names what a reply changes, for hook.rewrote.
func (rep *Reply) changes() []string {
	if rep.Decision == Block {
		return nil
	}
	var out []string
	add := func(set bool, what string) {
		if set {
			if rep.what != "" {
				what = rep.what
			}
			out = append(out, what)
		}
	}
	add(rep.Prompt != nil, kernel.NotePrompt)
	add(rep.Context != "", kernel.NoteContext)
	add(rep.Edits != nil, kernel.NoteEdited)
	add(rep.Text != nil, kernel.NoteText)
	add(rep.Reasoning != nil, kernel.NoteReasoning)
	add(rep.Refuse != nil, kernel.NoteRefused)
	add(rep.Note != "", "note")
	add(rep.Instructions != "", kernel.NoteInstructions)
	return out
}

// reason is a block's reason, or a default that names the hook.
func reason(h *PointHook, r string) string {
	if r != "" {
		return r
	}
	return fmt.Sprintf("blocked by hook %q", h.name)
}

func (pr pointRun) runStart(ctx context.Context, in *kernel.RunStartInput) (kernel.RunStartReply, error) {
	var out kernel.RunStartReply
	err := pr.runHooks(ctx, in, &out.Failed, func(h *PointHook, rep *Reply) (bool, error) {
		if rep.Decision == Block {
			out.Block = &kernel.Block{Hook: h.name, Reason: reason(h, rep.Reason)}
			return true, nil
		}
		if rep.Prompt != nil {
			in.Prompt = *rep.Prompt
			out.Prompt = &kernel.HookText{Hook: h.name, Text: *rep.Prompt}
		}
		if rep.Context != "" {
			out.Context = append(out.Context, kernel.HookText{Hook: h.name, Text: rep.Context})
		}
		return false, nil
	})
	return out, err
}

func (pr pointRun) beforeCompact(ctx context.Context, in *kernel.BeforeCompactInput) (kernel.BeforeCompactReply, error) {
	var out kernel.BeforeCompactReply
	err := pr.runHooks(ctx, in, &out.Failed, func(h *PointHook, rep *Reply) (bool, error) {
		if rep.Decision == Block {
			out.Block = &kernel.Block{Hook: h.name, Reason: reason(h, rep.Reason)}
			return true, nil
		}
		if rep.Instructions != "" {
			out.Instructions = append(out.Instructions, kernel.HookText{Hook: h.name, Text: rep.Instructions})
		}
		return false, nil
	})
	return out, err
}

func (pr pointRun) beforeModel(ctx context.Context, in *kernel.BeforeModelInput) (kernel.BeforeModelReply, error) {
	var out kernel.BeforeModelReply
	own := false // in.Messages is a copy of ours: the kernel's may be its history
	err := pr.runHooks(ctx, in, &out.Failed, func(h *PointHook, rep *Reply) (bool, error) {
		if rep.Decision == Block {
			out.Block = &kernel.Block{Hook: h.name, Reason: reason(h, rep.Reason)}
			return true, nil
		}
		if (rep.Edits != nil || rep.Context != "") && !own {
			in.Messages = append(make([]kernel.Message, 0, len(in.Messages)+1), in.Messages...)
			own = true
		}
		for _, e := range rep.Edits {
			i := -1
			for j := range in.Messages {
				if in.Messages[j].Seq == e.Seq && e.Seq != 0 {
					i = j
				}
			}
			if i < 0 {
				return false, fmt.Errorf("edit of message %d, which is not a stored message of the request", e.Seq)
			}
			in.Messages[i].Content = e.Content
			out.Edits = append(out.Edits, kernel.Edit{Hook: h.name, Seq: e.Seq, Content: e.Content})
		}
		if rep.Context != "" {
			in.Messages = append(in.Messages, kernel.Message{Role: kernel.RoleSystem, Content: rep.Context})
			out.Context = append(out.Context, kernel.HookText{Hook: h.name, Text: rep.Context})
		}
		return false, nil
	})
	if err != nil || out.Block != nil {
		return out, err
	}
	var guards []*PointHook
	for _, h := range pr.hs {
		if h.concurrent {
			guards = append(guards, h)
		}
	}
	if len(guards) > 0 {
		out.Guard = pointRun{hs: guards, log: pr.log}.guardrail(in)
	}
	return out, nil
}

// guardrail runs the concurrent hooks beside the model call, over the request
// as sent: the first block or closed failure ends the others and trips
// the wire. Its goroutines are its own, and waited for.
func (pr pointRun) guardrail(in *kernel.BeforeModelInput) func(context.Context) (kernel.GuardReply, error) {
	hs := pr.hs
	return func(ctx context.Context) (kernel.GuardReply, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type verdict struct {
			hook   string
			b      *kernel.Block
			failed bool // stepped aside
			err    error
		}
		ch := make(chan verdict, len(hs))
		for _, h := range hs {
			go func() {
				b, failed, err := h.guard(ctx, in, pr)
				ch <- verdict{h.name, b, failed, err}
			}()
		}
		var out kernel.GuardReply
		var first error
		for range hs {
			v := <-ch
			if v.failed {
				out.Failed = append(out.Failed, v.hook)
			}
			if (v.b != nil || v.err != nil) && out.Block == nil && first == nil {
				out.Block, first = v.b, v.err
				cancel() // the others' answers no longer matter
			}
		}
		return out, first
	}
}

// guard runs one concurrent hook: a block, nothing to let the answer
// through (failed: the hook failed and stepped aside), or the failure
// that trips the wire (fail_closed).
func (h *PointHook) guard(ctx context.Context, in *kernel.BeforeModelInput, pr pointRun) (b *kernel.Block, failed bool, err error) {
	start := time.Now()
	rep, ok, err := h.runOne(ctx, in)
	if !ok {
		return nil, false, nil
	}
	if err == nil && (rep.Context != "" || rep.Edits != nil) {
		err = errors.New("a concurrent guardrail can only allow or block: the request was sent already")
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, false, nil // cancelled: another guard decided, or the call ended
		}
		ferr := h.failed(ctx, in, err, start)
		pr.record(in, h, "failed", err.Error())
		return nil, ferr == nil, ferr
	}
	h.report(in, &rep, start)
	pr.record(in, h, rep.outcome(), rep.Reason)
	if rep.Decision == Block {
		return &kernel.Block{Hook: h.name, Reason: reason(h, rep.Reason), Concurrent: true}, false, nil
	}
	return nil, false, nil
}

func (pr pointRun) afterModel(ctx context.Context, in *kernel.AfterModelInput) (kernel.AfterModelReply, error) {
	var out kernel.AfterModelReply
	err := pr.runHooks(ctx, in, &out.Failed, func(h *PointHook, rep *Reply) (bool, error) {
		if rep.Decision == Block {
			out.Block = &kernel.Block{Hook: h.name, Reason: reason(h, rep.Reason)}
			return true, nil
		}
		for _, f := range rep.Refuse {
			known := false
			for _, c := range in.Answer.ToolCalls {
				known = known || c.ID == f.CallID
			}
			if !known {
				return false, fmt.Errorf("refuse names call %q, which the answer does not make", f.CallID)
			}
			out.Refused = append(out.Refused, kernel.Refusal{Hook: h.name, CallID: f.CallID, Reason: reason(h, f.Reason)})
		}
		if rep.Text != nil {
			in.Answer.Content = *rep.Text
			out.Text = &kernel.HookText{Hook: h.name, Text: *rep.Text}
		}
		if rep.Reasoning != nil {
			in.Answer.Reasoning = *rep.Reasoning
			out.Reasoning = &kernel.HookText{Hook: h.name, Text: *rep.Reasoning}
		}
		return false, nil
	})
	return out, err
}

func (pr pointRun) runEnd(ctx context.Context, in *kernel.RunEndInput) (kernel.RunEndReply, error) {
	var out kernel.RunEndReply
	err := pr.runHooks(ctx, in, &out.Failed, func(h *PointHook, rep *Reply) (bool, error) {
		if rep.Decision == Block && in.StopReason != kernel.StopCompleted {
			rep.Decision = Allow // only a completed run goes on; the others end as they stopped
		}
		if rep.Note != "" {
			out.Notes = append(out.Notes, kernel.HookText{Hook: h.name, Text: rep.Note})
		}
		if rep.Decision != Block {
			return false, nil
		}
		if in.Continuations >= in.MaxContinuations {
			return false, fmt.Errorf("asked to continue the run more than limits.max_continuations (%d) times", in.MaxContinuations)
		}
		msg := rep.Reason
		if msg == "" {
			msg = fmt.Sprintf("The run is not done yet (hook %q): keep working.", h.name)
		}
		out.Continue = &kernel.HookText{Hook: h.name, Text: msg}
		return true, nil
	})
	return out, err
}

// pointRun is one point's hooks, and where their decisions are logged.
type pointRun struct {
	hs  []*PointHook
	log func(Record)
}

// Record is one hook's decision at a lifecycle point, as a decision log
// records it (Options.Log).
type Record struct {
	Time      time.Time
	SessionID string
	Run, Turn int
	Hook      string
	Point     kernel.HookPoint
	// Outcome is allowed, blocked, changed or failed; Reason a block's
	// reason or a failure's error.
	Outcome string
	Reason  string
}

// record logs a hook's decision, when there is a log.
func (pr pointRun) record(in PointInput, h *PointHook, outcome, reason string) {
	if pr.log == nil {
		return
	}
	pi := in.Info()
	pr.log(Record{Time: time.Now(), SessionID: pi.SessionID, Run: pi.Run, Turn: pi.Turn, Hook: h.name, Point: h.point, Outcome: outcome, Reason: reason})
}

// pointsOf builds kernel.Points over a source of each point's hooks, read
// at every call (a Chain's current configuration); count(p) is
// len(at(p)) without building the list (Points.Active); log, when set,
// gets every decision.
func pointsOf(at func(kernel.HookPoint) []*PointHook, count func(kernel.HookPoint) int, log func(Record)) kernel.Points {
	run := func(p kernel.HookPoint) pointRun { return pointRun{hs: at(p), log: log} }
	return kernel.Points{
		RunStart: func(ctx context.Context, in *kernel.RunStartInput) (kernel.RunStartReply, error) {
			return run(kernel.PointRunStart).runStart(ctx, in)
		},
		BeforeCompact: func(ctx context.Context, in *kernel.BeforeCompactInput) (kernel.BeforeCompactReply, error) {
			return run(kernel.PointBeforeCompact).beforeCompact(ctx, in)
		},
		BeforeModel: func(ctx context.Context, in *kernel.BeforeModelInput) (kernel.BeforeModelReply, error) {
			return run(kernel.PointBeforeModel).beforeModel(ctx, in)
		},
		AfterModel: func(ctx context.Context, in *kernel.AfterModelInput) (kernel.AfterModelReply, error) {
			return run(kernel.PointAfterModel).afterModel(ctx, in)
		},
		HoldText: func() bool { return len(at(kernel.PointAfterModel)) > 0 },
		// A point without hooks costs the loop nothing, not even its input.
		Active: func(p kernel.HookPoint) bool { return count(p) > 0 },
		RunEnd: func(ctx context.Context, in *kernel.RunEndInput) (kernel.RunEndReply, error) {
			return run(kernel.PointRunEnd).runEnd(ctx, in)
		},
	}
}

// Points returns kernel.Points running hs, each at its point, in order.
// For configured hooks that reload, use Chain.Points.
func Points(hs ...*PointHook) kernel.Points {
	by := byPoint(hs)
	return pointsOf(func(p kernel.HookPoint) []*PointHook { return by[p] }, func(p kernel.HookPoint) int { return len(by[p]) }, nil)
}

// byPoint groups hooks by point, keeping their order.
func byPoint(hs []*PointHook) map[kernel.HookPoint][]*PointHook {
	by := map[kernel.HookPoint][]*PointHook{}
	for _, h := range hs {
		by[h.point] = append(by[h.point], h)
	}
	return by
}
