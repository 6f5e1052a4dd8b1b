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
	step.Messages = nil
	if len(r.msgs) > n {
		step.Messages = r.msgs[n:len(r.msgs):len(r.msgs)]
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
	err := r.storeCommit(step)
	if err != nil {
		clear(r.msgs[n:])
		r.msgs = r.msgs[:n]
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

// storeCommit writes step, timed for the observer when there is one.
func (r *run) storeCommit(step Step) error {
	commit := r.k.cfg.Store.Commit
	if r.k.commitStep != nil {
		commit = r.k.commitStep
	}
	obs := r.k.obs
	if obs == nil {
		return commit(r.persistCtx, r.meta.ID, step)
	}
	start := time.Now()
	err := commit(r.persistCtx, r.meta.ID, step)
	obs.Committed(time.Since(start), err)
	if so, ok := obs.(StepObserver); ok && err == nil {
		so.StepCommitted(r.meta.ID, &step)
	}
	return err
}
