package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// ErrAlreadyDelivered is returned by RunQueued for a queued message the
// session already holds: nothing ran.
var ErrAlreadyDelivered = errors.New("the queued message is already in the session")

// RunQueued runs q, a follow-up taken from the session's queue (the
// Inbox), as the session's next prompt, like Run, and exactly once: the
// prompt is stored with q.ID among SessionMeta.Delivered, and only then
// is the Inbox told q is delivered (Config.Inbox's Delivered removes it
// from the queue). A queue keeps a taken follow-up until then, so a
// process that stops between taking q and storing its prompt leaves it
// for the next taker; one that stops after storing it leaves a session
// that holds it, and RunQueued of that q only marks it delivered and
// returns ErrAlreadyDelivered, running nothing. (Continue marks such
// messages delivered too, before it resumes.)
func (k *Kernel) RunQueued(ctx context.Context, sessionID string, q Queued) (*RunResult, error) {
	if sessionID == "" {
		return nil, errors.New("run a queued message: the session id is empty")
	}
	return k.runPrompt(ctx, sessionID, q.Text, &q)
}

// withDelivered adds id to the session's delivered ids, keeping the last
// maxDelivered.
func withDelivered(delivered []string, id string) []string {
	d := append(slices.Clone(delivered), id)
	if len(d) > maxDelivered {
		d = d[len(d)-maxDelivered:]
	}
	return slices.Clip(d)
}

// delivered tells the inbox that q, whose prompt is stored, is delivered.
// A failure is reported as a notice and the run goes on: the session
// holds q.ID, so the next taker finds it delivered.
func (r *run) delivered(ctx context.Context, q *Queued) {
	in := r.k.cfg.Inbox
	if in == nil {
		return
	}
	if err := in.Delivered(context.WithoutCancel(ctx), r.meta.ID, []string{q.ID}); err != nil {
		r.k.emitIf(func() Event {
			return Notice{Source: "kernel", Level: "warn", Text: fmt.Sprintf("follow-up %s is stored in session %s, but the queue was not told (%v): the next taker skips it", q.ID, r.meta.ID, err)}
		})
	}
}

// alreadyDelivered marks q, which the session holds, delivered.
func (r *run) alreadyDelivered(ctx context.Context, q *Queued) error {
	if in := r.k.cfg.Inbox; in != nil {
		if err := in.Delivered(context.WithoutCancel(ctx), r.meta.ID, []string{q.ID}); err != nil {
			return fmt.Errorf("session %s: %w, and marking it delivered failed: %w", r.meta.ID, ErrAlreadyDelivered, err)
		}
	}
	return fmt.Errorf("session %s: follow-up %s: %w", r.meta.ID, q.ID, ErrAlreadyDelivered)
}

// settleDelivered tells the inbox, once more, about the messages the
// session holds: a process that stopped between storing a queued message
// and telling the inbox left it queued (claimed). Called when a session
// left running is opened, before anything else is delivered (which could
// push its id out of SessionMeta.Delivered).
func (r *run) settleDelivered(ctx context.Context) {
	in := r.k.cfg.Inbox
	if in == nil || !r.wasRunning || len(r.meta.Delivered) == 0 {
		return
	}
	if err := in.Delivered(context.WithoutCancel(ctx), r.meta.ID, slices.Clone(r.meta.Delivered)); err != nil {
		r.k.emitIf(func() Event {
			return Notice{Source: "kernel", Level: "warn", Text: fmt.Sprintf("session %s: settle its delivered queued messages: %v", r.meta.ID, err)}
		})
	}
}
