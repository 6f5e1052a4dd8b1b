package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Inbox holds user messages queued for a session while it runs ("steering").
// The loop takes them at each step boundary (after a tool round, before the
// next generation, and when the model answers), commits them as one user
// message, in the order Take returns them, then calls Delivered.
//
// Take claims the queued messages of sessionID, oldest first; a claimed
// message is not returned again, and can no longer be cancelled, unless it
// was never marked delivered (the process stopped in between): then Take
// returns it again and the loop skips it when the session's
// SessionMeta.Delivered lists its ID, which makes delivery exactly once.
// Implementations must be safe for concurrent use.
type Inbox interface {
	Take(ctx context.Context, sessionID string) ([]Queued, error)
	Delivered(ctx context.Context, sessionID string, ids []string) error
}

// Queued is one queued user message.
type Queued struct {
	ID   string    `json:"id"`
	Text string    `json:"text"`
	Time time.Time `json:"time"`
}

// maxDelivered bounds SessionMeta.Delivered.
const maxDelivered = 64

// steer delivers the session's queued messages; it reports whether any
// was delivered.
func (r *run) steer(ctx context.Context) (bool, error) {
	in := r.k.cfg.Inbox
	// Right after a prompt the message waits for the next boundary: two
	// user messages in a row read as a prompt left unanswered.
	if in == nil || len(r.msgs) == r.sysN || r.msgs[len(r.msgs)-1].Role == RoleUser {
		return false, nil
	}
	qs, err := in.Take(ctx, r.meta.ID)
	if err != nil {
		return false, fmt.Errorf("take queued messages: %w", err)
	}
	if len(qs) == 0 {
		return false, nil
	}
	var fresh []Queued
	ids := make([]string, 0, len(qs))
	delivered := slices.Clone(r.meta.Delivered)
	for _, q := range qs {
		ids = append(ids, q.ID)
		if slices.Contains(delivered, q.ID) {
			continue // delivered before the process stopped
		}
		delivered = append(delivered, q.ID)
		q.Text = r.k.cfg.ScrubInput(q.Text)
		fresh = append(fresh, q)
	}
	if len(fresh) > 0 {
		// Several queued messages become one user message, in order.
		texts := make([]string, len(fresh))
		for i, q := range fresh {
			texts[i] = q.Text
		}
		msgs := []Message{{Role: RoleUser, Content: strings.Join(texts, "\n\n")}}
		if len(delivered) > maxDelivered {
			delivered = delivered[len(delivered)-maxDelivered:]
		}
		r.meta.Delivered = slices.Clip(delivered)
		if err := r.commit(ctx, Step{Messages: msgs}); err != nil {
			return false, err
		}
		r.st.Prompt = msgs[0].Content
		if r.k.cfg.OnEvent != nil {
			seq := r.msgs[len(r.msgs)-1].Seq
			for _, q := range fresh {
				r.k.emit(SteerDelivered{SessionID: r.meta.ID, ID: q.ID, Seq: seq, Text: q.Text})
			}
		}
	}
	if err := in.Delivered(context.WithoutCancel(ctx), r.meta.ID, ids); err != nil {
		return len(fresh) > 0, fmt.Errorf("mark queued messages delivered: %w", err)
	}
	return len(fresh) > 0, nil
}
