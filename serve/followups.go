package serve

import (
	"context"
	"errors"

	"github.com/agentkernel/agentkernel/internal/faults"

	"github.com/agentkernel/agentkernel/kernel"
)

// Follow-ups run exactly once. A follow-up the API accepted (202) is a
// queue record until its prompt is stored: taking it (TakeFollowUp) only
// claims it, the run stores its prompt with its id in the session
// (Kernel.RunQueued), and only then is it removed. A server that stops
// in between leaves it queued: the next taker runs it, or finds it in the
// session already and runs nothing. A follow-up waits for the run in
// flight; when none runs, a sweep (shared store) or the server's start
// (a store one process owns) starts it.

// startWaiting starts the session's oldest queued follow-up when no run
// holds the session and it may run one (no pending approval, no
// interrupted run: that one is resumed first, and its follow-ups then
// run when it ends).
func (m *runManager) startWaiting(ctx context.Context, sid string) {
	se, err := m.s.cfg.Store.Load(ctx, sid)
	if err != nil || se.Meta.Labels[labelOwner] == "" || se.Pending != nil || m.s.status(ctx, &se.Meta) == statusInterrupted {
		return
	}
	var q kernel.Queued
	_, err = m.startWith(ctx, sid, se.Meta.Labels[labelOwner], sweepKey(se, "followup"), kindFollowUp, func(ctx context.Context, k *kernel.Kernel) (*kernel.RunResult, error) {
		return k.RunQueued(ctx, sid, q)
	}, func(ctx context.Context) (bool, error) {
		fu, err := m.s.cfg.Queue.TakeFollowUp(ctx, sid)
		if fu == nil || err != nil {
			return false, err
		}
		q = fu.Queued
		faults.At(faults.FollowUpTaken, sid)
		return true, nil
	})
	if err != nil && !isBusy(err) && !errors.Is(err, errNothingToRun) {
		m.s.logError("start a follow-up of session %s: %v", sid, err)
	}
}

// startQueued starts the follow-ups a previous process of a store this
// server owns left queued (on a shared store the replicas' sweep does).
func (m *runManager) startQueued(ctx context.Context) {
	ids, err := m.s.cfg.Queue.Waiting(ctx)
	if err != nil {
		m.s.logError("list the queued follow-ups: %v", err)
		return
	}
	for _, id := range ids {
		m.startWaiting(ctx, id)
	}
}
