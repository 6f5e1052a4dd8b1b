package kernel

import (
	"context"
	"fmt"
	"time"
)

// Interrupted is the content given to a tool call that has no result when a
// session is loaded: the process stopped (crashed, was killed) while the call
// was running.
const Interrupted = "interrupted: the kernel stopped before this call returned a result; it may or may not have run"

// Cancelled is the content given to tool calls a cancelled run left without
// a result.
const Cancelled = "cancelled: the run was cancelled before this call finished"

// open loads sessionID (or starts a new session when it is empty) and
// repairs a history left by a crash: tool calls without a result get an
// Interrupted result, made durable before anything else happens.
func (k *Kernel) open(ctx context.Context, sessionID string) (*run, error) {
	now := k.cfg.Now()
	r := &run{k: k, started: now}
	if !k.realClock {
		r.started = time.Now()
	}
	r.deltaFn = r.onDelta
	if sessionID == "" {
		// A new session: room for as many messages as the runs before it
		// wrote (room.go).
		if k.cfg.SystemPrompt != "" {
			r.sysN = 1
		}
		r.msgs = make([]Message, 0, k.rooms.room(r.sysN))
		if r.sysN > 0 {
			r.msgs = append(r.msgs, Message{Role: RoleSystem, Content: k.cfg.SystemPrompt})
		}
		r.isNew, r.sized = true, true
		r.meta = SessionMeta{ID: NewIDAt(r.started), Model: k.cfg.Model, Status: StatusIdle, Created: now, Updated: now, Context: k.cfg.SessionContext, Agent: k.cfg.Agent}
	} else {
		s, err := k.cfg.Store.Load(ctx, sessionID)
		if err != nil {
			return nil, fmt.Errorf("load session %s: %w", sessionID, err)
		}
		r.meta, r.pending = s.Meta, s.Pending
		r.wasRunning = s.Meta.Status == StatusRunning
		if k.cfg.Model != "" {
			r.meta.Model = k.cfg.Model
		}
		if k.cfg.SystemPrompt == "" {
			r.msgs = s.Messages // clipped by the store: appending copies once
		} else {
			r.msgs = make([]Message, 1, len(s.Messages)+9)
			r.msgs[0] = Message{Role: RoleSystem, Content: k.cfg.SystemPrompt}
			r.msgs = append(r.msgs, s.Messages...)
			r.sysN = 1
		}
	}
	r.res.SessionID = r.meta.ID
	r.st, _ = WalkState(&Session{Meta: r.meta, Messages: r.msgs[r.sysN:]}, k.cfg.MaxTurns, nil)
	// The run's clock and spend start now, also for a run an approval
	// resumes (the store keeps no usage per message).
	r.st.RunStarted, r.st.Now = now, now
	switch {
	case k.scope != nil:
		r.led = k.scope.led
		r.setLedgerPolicy()
	case !k.cfg.Budget.IsZero():
		r.ledger()
	}
	if r.ctxOn() {
		r.initContext()
	}
	if err := r.repair(ctx); err != nil {
		return nil, err
	}
	r.settleDelivered(ctx)
	return r, nil
}

// repair completes the tool calls of the last assistant message that have
// no result (other than the one awaiting approval): a call whose intent
// was stored may have run, a side-effecting call without one did not
// (interruptedAnswer). The session's status is kept: a session left
// running stays running (interrupted, resumable: Continue goes on from
// the answered calls), so nothing a kill leaves behind reads idle with an
// unanswered turn.
func (r *run) repair(ctx context.Context) error {
	fix := r.openAnswers(ctx)
	if len(fix) == 0 {
		return nil
	}
	if r.pending == nil {
		r.meta.Round = nil
	}
	if err := r.commit(ctx, Step{Messages: fix}); err != nil {
		return fmt.Errorf("repair session %s: %w", r.meta.ID, err)
	}
	return nil
}

// openAnswers returns the results repair stores for the calls of the last
// assistant message that have no result (other than the one awaiting
// approval), or nil when there are none.
func (r *run) openAnswers(ctx context.Context) []Message {
	last := -1
	for i := len(r.msgs) - 1; i >= r.sysN; i-- {
		if r.msgs[i].Role == RoleAssistant {
			last = i
			break
		}
		if r.msgs[i].Role != RoleTool && r.msgs[i].Role != RoleCompaction {
			return nil
		}
	}
	if last < 0 || len(r.msgs[last].ToolCalls) == 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range r.msgs[last+1:] {
		answered[m.ToolCallID] = true
	}
	var rd *Round
	if r.meta.Round != nil && r.meta.Round.Seq == r.msgs[last].Seq {
		rd = r.meta.Round
	}
	var fix []Message
	now := r.k.cfg.Now()
	for _, c := range r.msgs[last].ToolCalls {
		if answered[c.ID] || (r.pending != nil && r.pending.Call.ID == c.ID) {
			continue
		}
		if t, ok := r.k.agentCall(c.Name); ok {
			m := r.answerChild(ctx, t, c, r.msgs[last].Seq)
			m.Time = now
			fix = append(fix, m)
			continue
		}
		m := r.interruptedAnswer(ctx, c, r.msgs[last].Time, rd)
		m.Time = now
		fix = append(fix, m)
	}
	return fix
}

func (r *run) onDelta(d Delta) {
	k := r.k
	if k.cfg.OnEvent == nil || d.Text == "" {
		return
	}
	r.streamed += len(d.Text)
	if d.Kind == DeltaReasoning {
		k.emit(ReasoningDelta{Text: d.Text})
	} else {
		k.emit(MessageDelta{Text: d.Text})
	}
}
