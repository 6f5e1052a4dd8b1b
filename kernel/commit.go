package kernel

import (
	"context"
	"fmt"
)

// commit assigns sequence numbers to step's messages, stores the step with
// the run's metadata, and appends the messages to the history. It ignores
// ctx's cancellation: a cancelled run must still record how it ended.
func (r *run) commit(ctx context.Context, step Step) error {
	now := r.k.cfg.Now()
	seq := r.meta.LastSeq
	for i := range step.Messages {
		seq++
		step.Messages[i].Seq = seq
		if step.Messages[i].Time.IsZero() {
			step.Messages[i].Time = now
		}
	}
	meta := r.meta
	r.st.syncMeta(&meta)
	meta.LastSeq = seq
	meta.Updated = now
	step.Meta = meta
	if r.persistCtx == nil {
		r.persistCtx = context.WithoutCancel(ctx)
	}
	if err := r.k.cfg.Store.Commit(r.persistCtx, r.meta.ID, step); err != nil {
		return fmt.Errorf("persist session %s: %w", r.meta.ID, err)
	}
	r.meta = meta
	r.isNew = false
	for _, m := range step.Messages {
		r.msgs = append(r.msgs, m)
		if r.cx != nil {
			r.added()
		}
	}
	return nil
}
