package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// Queue is the steering and follow-up queue (kernel.Inbox,
// replica.Queue) in the ak_queue table, as one replica sees it: it claims
// steering messages in that replica's name. It has the semantics of the
// directory queue (kernel/queue): a claimed message is not offered again
// to the replica that claimed it until it is delivered; a claim another
// replica left (it stopped between taking a message and committing it)
// is offered again, and the kernel skips it when the session already
// holds it, so a message is delivered once. Only the holder of a
// session's lease runs it, so one replica at a time takes its messages.
//
// A follow-up stays in the table, claimed, from TakeFollowUp until
// Delivered (replica.Queue). Each call is bounded by its ctx, and its
// retries by the store's RetryFor. It is safe for concurrent use.
type Queue struct {
	s       *Store
	replica string
}

// Queue returns the queue as replica sees it (replica.Shared).
func (s *Store) Queue(replicaName string) replica.Queue { return &Queue{s: s, replica: replicaName} }

// Add queues text for session as kind (queue.Steer or queue.FollowUp).
// A follow-up is announced to every replica (replica.NoticeFollowUp), so
// the one that runs the session, or any when none does, starts it.
func (q *Queue) Add(ctx context.Context, session, text, kind string) (queue.Entry, error) {
	if kind != queue.Steer && kind != queue.FollowUp {
		return queue.Entry{}, fmt.Errorf("unknown queue kind %q (want steer or followup)", kind)
	}
	if strings.TrimSpace(text) == "" {
		return queue.Entry{}, errors.New("empty message")
	}
	if err := rules.CheckID(session); err != nil {
		return queue.Entry{}, fmt.Errorf("queue: %w", err)
	}
	now := time.Now()
	var rnd [4]byte
	rand.Read(rnd[:])
	id := fmt.Sprintf("%020d-%s", now.UnixNano(), hex.EncodeToString(rnd[:]))
	err := q.s.retry(ctx, func(ctx context.Context) error {
		_, err := q.s.pool.Exec(ctx, `INSERT INTO ak_queue (id, session_id, kind, text, created) VALUES ($1, $2, $3, $4, $5)`, id, session, kind, text, now)
		return err
	})
	if isFK(err) {
		return queue.Entry{}, fmt.Errorf("queue: session %q: %w", session, kernel.ErrSessionNotFound)
	}
	if err != nil {
		return queue.Entry{}, q.s.classify("queue a message for session "+session, err)
	}
	if kind == queue.FollowUp {
		if err := q.s.Notify(ctx, replica.Notice{Kind: replica.NoticeFollowUp, Session: session}); err != nil {
			q.s.opts.Logger.Warn("announce a follow-up", "session", session, "error", err)
		}
	}
	return queue.Entry{Queued: kernel.Queued{ID: id, Text: text, Time: now}, Kind: kind}, nil
}

// List returns the session's queued messages (not those being
// delivered), oldest first.
func (q *Queue) List(ctx context.Context, session string) ([]queue.Entry, error) {
	return q.entries(ctx, "list the queue of session "+session,
		`SELECT id, text, created, kind FROM ak_queue WHERE session_id = $1 AND claimed_by IS NULL ORDER BY id`, session)
}

func (q *Queue) entries(ctx context.Context, op, sql string, args ...any) ([]queue.Entry, error) {
	var out []queue.Entry
	err := q.s.retry(ctx, func(ctx context.Context) error {
		rows, err := q.s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (queue.Entry, error) {
			var e queue.Entry
			err := row.Scan(&e.ID, &e.Text, &e.Time, &e.Kind)
			return e, err
		})
		return err
	})
	if err != nil {
		return nil, q.s.classify(op, err)
	}
	slices.SortFunc(out, func(a, b queue.Entry) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Cancel removes a queued message before it is delivered
// (queue.ErrNotQueued when it is no longer queued).
func (q *Queue) Cancel(ctx context.Context, session, id string) error {
	var n int64
	err := q.s.retry(ctx, func(ctx context.Context) error {
		tag, err := q.s.pool.Exec(ctx, `DELETE FROM ak_queue WHERE session_id = $1 AND id = $2 AND claimed_by IS NULL`, session, id)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return q.s.classify("cancel queued message "+id, err)
	}
	if n == 0 {
		return fmt.Errorf("message %s: %w", id, queue.ErrNotQueued)
	}
	return nil
}

// Take claims the session's steering messages, oldest first, with those
// another replica claimed and never delivered (kernel.Inbox).
func (q *Queue) Take(ctx context.Context, session string) ([]kernel.Queued, error) {
	es, err := q.entries(ctx, "take queued messages of session "+session, `UPDATE ak_queue SET claimed_by = $2
WHERE session_id = $1 AND kind = 'steer' AND claimed_by IS DISTINCT FROM $2 RETURNING id, text, created, kind`, session, q.replica)
	if err != nil {
		return nil, err
	}
	out := make([]kernel.Queued, len(es))
	for i, e := range es {
		out[i] = e.Queued
	}
	return out, nil
}

// Delivered removes the messages now in the session (kernel.Inbox).
func (q *Queue) Delivered(ctx context.Context, session string, ids []string) error {
	err := q.s.retry(ctx, func(ctx context.Context) error {
		_, err := q.s.pool.Exec(ctx, `DELETE FROM ak_queue WHERE session_id = $1 AND id = ANY($2)`, session, ids)
		return err
	})
	if err != nil {
		return q.s.classify("mark queued messages delivered", err)
	}
	return nil
}

// TakeFollowUp claims the session's oldest follow-up for this replica and
// returns it, or nil (replica.Queue): it stays in the table until
// Delivered removes it once its prompt is stored. One another replica
// claimed and never delivered (it stopped) is taken again: only the
// holder of the session's lease takes its follow-ups.
func (q *Queue) TakeFollowUp(ctx context.Context, session string) (*queue.Entry, error) {
	es, err := q.entries(ctx, "take a follow-up of session "+session, `UPDATE ak_queue SET claimed_by = $2 WHERE id =
  (SELECT id FROM ak_queue WHERE session_id = $1 AND kind = 'followup' ORDER BY id LIMIT 1 FOR UPDATE)
RETURNING id, text, created, kind`, session, q.replica)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	return &es[0], nil
}

// Waiting lists the sessions with a follow-up queued or claimed
// (replica.Queue).
func (q *Queue) Waiting(ctx context.Context) ([]string, error) {
	return q.s.strings(ctx, "list sessions with follow-ups", `SELECT DISTINCT session_id FROM ak_queue WHERE kind = 'followup' ORDER BY 1`)
}

// isFK reports a foreign-key violation: the session does not exist.
func isFK(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

var _ replica.Queue = (*Queue)(nil)
