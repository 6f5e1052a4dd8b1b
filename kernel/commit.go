package kernel

import (
	"context"
	"fmt"
	"time"
)

// commit assigns sequence numbers to step's messages, stores the step with
// the run's metadata, and appends the messages to the history. It ignores
// ctx's cancellation: a cancelled run must still record how it ended.
func (r *run) commit(ctx context.Context, step Step) error {
	n := len(r.msgs)
	r.msgs = append(r.msgs, step.Messages...)
	return r.commitTail(ctx, n, step)
}

// commitMsg commits a step of one message (a prompt or an assistant
// message) without building a slice for it.
func (r *run) commitMsg(ctx context.Context, m Message, step Step) error {
	n := len(r.msgs)
	r.msgs = append(r.msgs, m)
	return r.commitTail(ctx, n, step)
}

// commitTail commits the messages r.msgs[n:], already appended: the step
// the store receives is that tail of the history, so a step costs no copy
// of its messages (the history is append-only: a store may keep the
// slice). When the store fails, the history is cut back to n.
func (r *run) commitTail(ctx context.Context, n int, step Step) error {
	if r.held != nil {
		// The held step first: the history is stored in order.
		if err := r.release(); err != nil {
			return err
		}
	}
	step.Messages, step.History = nil, nil
	if len(r.msgs) > n {
		step.Messages = r.msgs[n:len(r.msgs):len(r.msgs)]
	}
	if !r.reuses {
		step.History = r.msgs[r.sysN:len(r.msgs):len(r.msgs)]
	}
	var now time.Time
	if k := len(step.Messages); k > 0 {
		now = step.Messages[k-1].Time // set by the step that wrote it
	}
	if now.IsZero() {
		now = r.k.cfg.Now()
	}
	seq := r.meta.LastSeq
	for i := range step.Messages {
		seq++
		step.Messages[i].Seq = seq
		if step.Messages[i].Time.IsZero() {
			step.Messages[i].Time = now
		}
	}
	if r.led != nil {
		r.led.fold(&r.st)
	}
	meta := r.meta
	r.st.syncMeta(&meta)
	meta.LastSeq = seq
	meta.Updated = now
	step.Meta = meta
	step.Fence = r.k.fence()
	if r.persistCtx == nil {
		r.persistCtx = ctx
		if ctx.Done() != nil {
			r.persistCtx = context.WithoutCancel(ctx)
		}
	}
	if r.hold {
		// Stored by release, with the events that end the run; until
		// then the run goes on as if it were (nothing of it is shown
		// before it is stored: its events wait with it).
		r.held = &heldStep{step: step, n: n, meta: r.meta, isNew: r.isNew}
	} else if err := r.storeCommit(step, false, nil); err != nil {
		r.rewind(n)
		return fmt.Errorf("persist session %s: %w", r.meta.ID, err)
	}
	r.meta = meta
	r.isNew = false
	if r.cx != nil {
		all := r.msgs
		for i := n; i < len(all); i++ {
			r.msgs = all[:i+1]
			r.added()
		}
	}
	return nil
}

// rewind cuts the history back to its first n messages after a failed
// commit. It writes nothing into the array: a store may hold the step's
// History even when the commit as a whole failed (a front end whose store
// took the step and then failed), so the cut history is clipped, and the
// next append copies it to a new array instead of overwriting the step.
func (r *run) rewind(n int) {
	r.msgs = r.msgs[:n:n]
}

// heldStep is a run's last answer, committed (RunOptions.CommitEnd) with
// the events that end the run, which wait with it: run.held.
type heldStep struct {
	step   Step
	n      int         // len(r.msgs) before the step
	meta   SessionMeta // r.meta before the step
	isNew  bool
	events []Event
}

// emitEnd emits an event that ends the run: with a held step, it waits
// to be stored with it (release).
func (r *run) emitEnd(build func() Event) {
	if r.held == nil {
		r.k.emitIf(build)
		return
	}
	if r.k.cfg.OnEvent != nil {
		r.held.events = append(r.held.events, build())
	}
}

// release commits the held step, if any, with the events waiting with
// it (RunOptions.CommitEnd), then emits them. When the commit fails,
// nothing of it was stored and the events are dropped: the history is
// cut back to before the step, and the run fails from there.
// Why: RATIONALE.md, "A run's end rides its last step (issue 45)".
func (r *run) release() error {
	h := r.held
	if h == nil {
		return nil
	}
	r.held = nil
	events := h.events
	if err := r.storeCommit(h.step, true, events); err != nil {
		r.rewind(h.n)
		r.meta, r.isNew = h.meta, h.isNew
		return fmt.Errorf("persist session %s: %w", r.meta.ID, err)
	}
	r.k.emitAll(events)
	return nil
}

// storeCommit writes step (a held one, last, with the events that end
// the run), timed for the observer when there is one.
func (r *run) storeCommit(step Step, last bool, end []Event) error {
	obs := r.k.obs
	if obs == nil {
		return r.commitWith(step, last, end)
	}
	start := time.Now()
	err := r.commitWith(step, last, end)
	obs.Committed(time.Since(start), err)
	if so, ok := obs.(StepObserver); ok && err == nil {
		// A copy, so that only a run with a step observer moves the step
		// to the heap (its address escapes): storeCommit's parameter
		// itself stays on the stack.
		s := step
		so.StepCommitted(r.meta.ID, &s)
	}
	return err
}

// commitWith commits step through the front end's CommitEnd (last) or
// CommitStep when set, else the store.
func (r *run) commitWith(step Step, last bool, end []Event) error {
	switch {
	case last:
		return r.k.commitEnd(r.persistCtx, r.meta.ID, step, end)
	case r.k.commitStep != nil:
		return r.k.commitStep(r.persistCtx, r.meta.ID, step)
	}
	return r.k.cfg.Store.Commit(r.persistCtx, r.meta.ID, step)
}
