package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// commitSQL stores one step (ak_commit: migrations/0001_sessions.sql, and
// 0005_segments.sql, which packs the chunks a step completes).
const commitSQL = `SELECT code, last, holder, token, expires FROM ak_commit($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// Commit stores step in one statement (see kernel.Store and kernel.Leaser):
// the session's row is locked, the fence and the seq are checked, and the
// messages and metadata are written, or nothing is.
//
// A failure that certainly stored nothing (a serialization failure, a
// statement timeout, a connection lost before the statement was sent) is
// retried for Options.RetryFor. When the connection breaks after the
// statement was sent, Commit reads back whether the step is stored and
// resends it only when it is not; when it cannot tell before RetryFor
// passes it returns an error wrapping ErrUnavailable, and the step may or
// may not be stored (the next Load says which).
func (s *Store) Commit(ctx context.Context, id string, step kernel.Step) error {
	args, bodies, first, err := commitArgs(ctx, id, step)
	if err != nil {
		return err
	}
	msgs := step.Messages
	var res commitResult
	deadline := time.Now().Add(s.opts.RetryFor)
	for attempt := 0; ; attempt++ {
		err = s.retry(ctx, func(ctx context.Context) error {
			return s.pool.QueryRow(ctx, commitSQL, args...).Scan(&res.code, &res.last, &res.holder, &res.token, &res.expires)
		})
		if err == nil || !unreachable(err) || time.Now().After(deadline) {
			break
		}
		// The statement may have been applied before the connection
		// broke: look before sending it again.
		if len(bodies) > 0 {
			stored, verr := s.stepStored(ctx, id, first, bodies)
			if verr == nil && stored {
				return nil
			}
			if verr != nil && !unreachable(verr) {
				return s.classify("commit session "+id, verr)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("commit session %s: %w", id, ctx.Err())
		case <-time.After(min(50*time.Millisecond<<min(attempt, 4), time.Second)):
		}
	}
	if err != nil {
		return s.classify("commit session "+id, err)
	}
	return res.err(id, step, first, len(msgs))
}

// err is the error of ak_commit's answer to a step of n messages from
// seq first, nil for ok.
func (res *commitResult) err(id string, step kernel.Step, first int64, n int) error {
	switch res.code {
	case "ok":
		return nil
	case "seq":
		if n == 0 {
			return fmt.Errorf("session %q: %w", id, kernel.ErrSeqConflict)
		}
		return fmt.Errorf("session %q: first message has seq %d, want %d: %w", id, first, res.last+1, kernel.ErrSeqConflict)
	case "fenced":
		return fmt.Errorf("commit session %s: %w: the step's lease token %d is not the session's live lease (token %d)", id, kernel.ErrLeaseLost, step.Fence, res.token)
	case "held":
		he := &kernel.LeaseHeldError{SessionID: id}
		if res.holder != nil && res.expires != nil {
			he.Holder, he.Expires = *res.holder, *res.expires
		}
		return fmt.Errorf("commit session %s: %w", id, he)
	}
	return fmt.Errorf("commit session %s: unexpected answer %q from ak_commit", id, res.code)
}

type commitResult struct {
	code    string
	last    int64
	holder  *string
	token   int64
	expires *time.Time
}

// stepStored reports whether the messages bodies, from seq first on, are
// stored exactly so.
func (s *Store) stepStored(ctx context.Context, id string, first int64, bodies [][]byte) (bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT body FROM ak_messages WHERE session_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq`,
		id, first, first+int64(len(bodies)))
	if err != nil {
		return false, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return false, err
	}
	if len(got) != len(bodies) {
		return false, nil
	}
	for i := range got {
		if !bytes.Equal(got[i], bodies[i]) {
			return false, nil
		}
	}
	return true, nil
}

// nullJSON is b as a json parameter, NULL when empty.
func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// commitArgs checks step and returns the arguments of ak_commit, the
// messages' bodies and the first message's seq.
func commitArgs(ctx context.Context, id string, step kernel.Step) ([]any, [][]byte, int64, error) {
	if err := rules.CheckID(id); err != nil {
		return nil, nil, 0, fmt.Errorf("commit session: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, 0, fmt.Errorf("commit session %s: %w", id, err)
	}
	msgs := step.Messages
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Seq != msgs[0].Seq+uint64(i) {
			return nil, nil, 0, fmt.Errorf("session %q: message %d has seq %d, want %d: %w", id, i, msgs[i].Seq, msgs[0].Seq+uint64(i), kernel.ErrSeqConflict)
		}
	}
	bodies := make([][]byte, len(msgs))
	for i := range msgs {
		bodies[i] = encodeBody(&msgs[i])
	}
	meta := step.Meta
	meta.ID = id
	meta.LastSeq = 0 // the row's last_seq is the truth
	metaJSON, err := json.Marshal(&meta)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("commit session %s: encode meta: %w", id, err)
	}
	var pending []byte
	if step.Pending != nil {
		if pending, err = json.Marshal(step.Pending); err != nil {
			return nil, nil, 0, fmt.Errorf("commit session %s: encode pending approval: %w", id, err)
		}
	}
	var first int64
	if len(msgs) > 0 {
		first = int64(msgs[0].Seq)
	}
	updated := meta.Updated
	if updated.IsZero() {
		updated = time.Now()
	}
	return []any{id, first, bodies, metaJSON, string(meta.Status), updated, nullJSON(pending), step.ClearPending, int64(step.Fence)}, bodies, first, nil
}
