package kernel

import (
	"context"
	"errors"
	"fmt"
)

// The run's side of the lifecycle points (Config.Points): each is called
// only when its field is set, so a point without hooks costs the loop one
// nil check. What a hook changed is stored with the step it shaped: the
// prompt (run_start), the answer or the marker of a blocked turn
// (before_compact, before_model, after_model: r.notes, r.edits and the
// context messages r.inject) and the message a run_end hook continued
// with.

// info is the PointInfo of point p now.
func (r *run) info(p HookPoint) PointInfo {
	pi := PointInfo{Point: p, SessionID: r.meta.ID, Run: r.st.Run, Turn: r.st.Turn, Principal: r.k.principal, Hooks: r.st.Hooks, st: &r.st}
	if r.k.cfg.OnEvent != nil {
		pi.emit = r.k.emit
	}
	return pi
}

// pointErr is the error a point's failure ends the run with: the run's
// own cancellation, or a *GuardrailError (StopGuardrail).
func pointErr(ctx context.Context, p HookPoint, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ge *GuardrailError
	if errors.As(err, &ge) {
		if ge.Point == "" {
			ge.Point = p
		}
		return ge
	}
	return &GuardrailError{Point: p, Err: err}
}

// note records what a hook did in this turn: in the state policy reads
// and, with the turn's answer, in the store.
func (r *run) note(n HookNote) {
	r.notes = append(r.notes, n)
	if pv := r.st.Hooks.of(n.Point); pv != nil {
		pv.note(n.Hook, n.What)
	}
}

func (r *run) noteFailed(p HookPoint, hooks []string) {
	for _, h := range hooks {
		r.note(HookNote{Hook: h, Point: p, What: NoteFailed})
	}
}

// turnRecord is the HookRecord of the message that closes the turn (its
// answer, or the marker of a block), and resets the turn's hook state.
func (r *run) turnRecord() *HookRecord {
	if len(r.notes) == 0 && len(r.edits) == 0 {
		return nil
	}
	rec := &HookRecord{Notes: r.notes, Edits: r.edits}
	r.notes, r.edits = nil, nil
	return rec
}

// blockErr is the *GuardrailError of a block at p.
func blockErr(p HookPoint, b *Block) *GuardrailError {
	return &GuardrailError{Hook: b.Hook, Point: p, Reason: b.Reason, Concurrent: b.Concurrent}
}

// runStart runs the run_start hooks on the prompt m, before it is stored:
// m may be rewritten and get notes; extra are the context messages to
// store after it. A block or a failure is returned as a *GuardrailError.
func (r *run) runStart(ctx context.Context, m *Message) (extra []Message, err error) {
	const p = PointRunStart
	in := &RunStartInput{PointInfo: r.info(p), Prompt: m.Content, NewSession: r.isNew}
	rep, err := r.k.cfg.Points.RunStart(ctx, in)
	if err != nil {
		err = pointErr(ctx, p, err)
		var ge *GuardrailError
		if errors.As(err, &ge) {
			r.note(HookNote{Hook: ge.Hook, Point: p, What: NoteFailed, Reason: ge.Error()})
		}
		m.Hooks = r.turnRecord()
		return nil, err
	}
	r.noteFailed(p, rep.Failed)
	if b := rep.Block; b != nil {
		r.note(HookNote{Hook: b.Hook, Point: p, What: NoteBlocked, Reason: b.Reason})
		m.Hooks = r.turnRecord()
		return nil, blockErr(p, b)
	}
	if rep.Prompt != nil {
		m.Content = rep.Prompt.Text
		r.st.Prompt = m.Content
		r.note(HookNote{Hook: rep.Prompt.Hook, Point: p, What: NotePrompt})
	}
	for _, c := range rep.Context {
		r.note(HookNote{Hook: c.Hook, Point: p, What: NoteContext})
		extra = append(extra, contextMessage(c, p))
	}
	m.Hooks = r.turnRecord()
	return extra, nil
}

// contextMessage is the system message that carries a hook's context.
func contextMessage(c HookText, p HookPoint) Message {
	return Message{Role: RoleSystem, Content: c.Text, Hooks: &HookRecord{Notes: []HookNote{{Hook: c.Hook, Point: p, What: NoteContext}}}}
}

// refuse ends a run whose run_start hooks refused it or failed: the
// prompt is stored with the notes that say so (a later prompt leaves it
// out of requests), and no turn is started.
func (r *run) refuse(ctx context.Context, m Message, err error) (*RunResult, error) {
	r.meta.Status = StatusIdle
	if cerr := r.commitMsg(ctx, m, Step{}); cerr != nil {
		return r.fail(ctx, cerr)
	}
	var ge *GuardrailError
	if errors.As(err, &ge) && ge.Err == nil {
		return r.stopBlocked(ctx, ge)
	}
	return r.fail(ctx, err)
}

// stopBlocked ends the run a hook blocked, with StopGuardrail.
func (r *run) stopBlocked(ctx context.Context, ge *GuardrailError) (*RunResult, error) {
	r.res.Blocked = &Block{Hook: ge.Hook, Point: ge.Point, Reason: ge.Reason, Concurrent: ge.Concurrent}
	return r.done(ctx, StopGuardrail, "")
}

// blocked ends a turn a before_model or after_model hook blocked: a
// marker holding the reason is stored in place of the answer (it and the
// prompt it leaves unanswered are left out of later requests).
func (r *run) blocked(ctx context.Context, ge *GuardrailError) (*RunResult, error) {
	r.inject = r.inject[:0]
	r.meta.Status = StatusIdle
	marker := Message{Role: RoleAssistant, Failed: ge.Error(), Hooks: r.turnRecord()}
	if err := r.commitMsg(ctx, marker, Step{}); err != nil {
		return r.fail(ctx, err)
	}
	return r.stopBlocked(ctx, ge)
}

// asBlock returns err's *GuardrailError when it is a block (not a
// failure).
func asBlock(err error) *GuardrailError {
	var ge *GuardrailError
	if errors.As(err, &ge) && ge.Err == nil {
		return ge
	}
	return nil
}

// beforeModel runs the before_model hooks on the request msgs: it returns
// the request to send (context added, edits applied, never msgs' own
// array) and the concurrent guardrail, if any.
func (r *run) beforeModel(ctx context.Context, msgs []Message, tools []ToolSpec) ([]Message, func(context.Context) (GuardReply, error), error) {
	const p = PointBeforeModel
	k := r.k
	in := &BeforeModelInput{PointInfo: r.info(p), Model: k.cfg.Model, Messages: msgs, Tools: r.toolNames(tools),
		Tokens: r.st.Context.Used, Window: k.cfg.ContextWindow, Budgets: r.warnings()}
	rep, err := k.cfg.Points.BeforeModel(ctx, in)
	if err != nil {
		return nil, nil, pointErr(ctx, p, err)
	}
	r.noteFailed(p, rep.Failed)
	if b := rep.Block; b != nil {
		r.note(HookNote{Hook: b.Hook, Point: p, What: NoteBlocked, Reason: b.Reason})
		return nil, nil, blockErr(p, b)
	}
	if len(rep.Edits) > 0 || len(rep.Context) > 0 {
		cp := make([]Message, len(msgs), len(msgs)+len(rep.Context)) // msgs may be the history itself
		copy(cp, msgs)
		msgs = cp
	}
	for _, e := range rep.Edits {
		i := seqIndex(msgs, e.Seq)
		if i < 0 {
			return nil, nil, &GuardrailError{Hook: e.Hook, Point: p, Err: fmt.Errorf("edit of message %d, which is not a stored message of the request", e.Seq)}
		}
		msgs[i].Content = e.Content
		r.edits = append(r.edits, e)
		r.note(HookNote{Hook: e.Hook, Point: p, What: NoteEdited})
	}
	for _, c := range rep.Context {
		m := contextMessage(c, p)
		r.inject = append(r.inject, m)
		msgs = append(msgs, m)
		r.note(HookNote{Hook: c.Hook, Point: p, What: NoteContext})
	}
	return msgs, rep.Guard, nil
}

// seqIndex is the index of the stored message seq in msgs, or -1.
func seqIndex(msgs []Message, seq uint64) int {
	if seq == 0 {
		return -1
	}
	for i := range msgs {
		if msgs[i].Seq == seq {
			return i
		}
	}
	return -1
}

// warnings are the ids of the budgets whose warning this run emitted.
func (r *run) warnings() []string {
	if len(r.warned) == 0 {
		return nil
	}
	ids := make([]string, 0, len(r.warned))
	for id := range r.warned {
		ids = append(ids, id)
	}
	return ids
}

// afterModel runs the after_model hooks on the answer, before it is
// stored or acted on.
func (r *run) afterModel(ctx context.Context, resp *Response) error {
	const p = PointAfterModel
	m := &resp.Message
	in := &AfterModelInput{PointInfo: r.info(p), Model: m.Model, Answer: *m}
	rep, err := r.k.cfg.Points.AfterModel(ctx, in)
	if err != nil {
		return pointErr(ctx, p, err)
	}
	r.noteFailed(p, rep.Failed)
	if b := rep.Block; b != nil {
		r.note(HookNote{Hook: b.Hook, Point: p, What: NoteBlocked, Reason: b.Reason})
		return blockErr(p, b)
	}
	if t := rep.Text; t != nil {
		m.Content = t.Text
		if m.RawText() != "" {
			// The raw answer holds the old text: requests now write the
			// calls out again from ToolCalls.
			m.Protocol = nil
		}
		r.note(HookNote{Hook: t.Hook, Point: p, What: NoteText})
	}
	if t := rep.Reasoning; t != nil {
		m.Reasoning = t.Text
		r.note(HookNote{Hook: t.Hook, Point: p, What: NoteReasoning})
	}
	for _, f := range rep.Refused {
		known := false
		for _, c := range m.ToolCalls {
			known = known || c.ID == f.CallID
		}
		if !known {
			return &GuardrailError{Hook: f.Hook, Point: p, Err: fmt.Errorf("refused call %q, which the answer does not make", f.CallID)}
		}
		if r.refused == nil {
			r.refused = map[string]Refusal{}
		}
		r.refused[f.CallID] = f
		r.note(HookNote{Hook: f.Hook, Point: p, What: NoteRefused, Reason: f.Reason})
	}
	return nil
}

// refusal is the result of a call an after_model hook refused.
func (r *run) refusal(tc ToolCall, f Refusal) callOut {
	reason := f.Reason
	if reason == "" {
		reason = "no reason given"
	}
	return r.synthetic(tc, OutcomeDenied, fmt.Sprintf("denied by hook %q (after_model): %s", f.Hook, reason))
}

// runEnd runs the run_end hooks as the run ends with reason. It reports
// whether the run continues: only a completed run can (when continuable),
// with the message stored and counted.
func (r *run) runEnd(ctx context.Context, reason StopReason, output string, continuable bool) (bool, error) {
	const p = PointRunEnd
	k := r.k
	r.ended = true
	in := &RunEndInput{PointInfo: r.info(p), StopReason: reason, Output: output, Calls: r.st.RunCalls,
		Continuations: r.st.Continuations, MaxContinuations: k.maxCont}
	rep, err := k.cfg.Points.RunEnd(ctx, in)
	if err != nil {
		return false, pointErr(ctx, p, err)
	}
	for _, h := range rep.Failed {
		r.st.Hooks.RunEnd.note(h, NoteFailed)
	}
	for _, n := range rep.Notes {
		r.st.Hooks.RunEnd.note(n.Hook, NoteInstructions)
	}
	r.res.Notes = append(r.res.Notes, rep.Notes...)
	c := rep.Continue
	if c == nil || !continuable || reason != StopCompleted {
		return false, nil
	}
	if r.st.Continuations >= k.maxCont {
		return false, &GuardrailError{Hook: c.Hook, Point: p,
			Err: fmt.Errorf("asked to continue the run more than limits.max_continuations (%d) times", k.maxCont)}
	}
	m := Message{Role: RoleUser, Content: c.Text, Hooks: &HookRecord{Notes: []HookNote{{Hook: c.Hook, Point: p, What: NoteContinued}}}}
	r.meta.Status = StatusRunning
	if err := r.commitMsg(ctx, m, Step{}); err != nil {
		return false, err
	}
	r.st.continueRun()
	r.st.noteHooks(&r.msgs[len(r.msgs)-1])
	r.ended = false
	return true, nil
}

// beforeCompact runs the before_compact hooks before a summary is
// written; it returns the instructions to add to the summariser's, or an
// error when a hook vetoed the compaction or failed (closed).
func (r *run) beforeCompact(ctx context.Context, in *BeforeCompactInput) (string, error) {
	const p = PointBeforeCompact
	rep, err := r.k.cfg.Points.BeforeCompact(ctx, in)
	if err != nil {
		return "", pointErr(ctx, p, err)
	}
	r.noteFailed(p, rep.Failed)
	if b := rep.Block; b != nil {
		r.note(HookNote{Hook: b.Hook, Point: p, What: NoteBlocked, Reason: b.Reason})
		return "", blockErr(p, b)
	}
	var text string
	for _, t := range rep.Instructions {
		r.note(HookNote{Hook: t.Hook, Point: p, What: NoteInstructions})
		text = joinText(text, t.Text)
	}
	return text, nil
}
