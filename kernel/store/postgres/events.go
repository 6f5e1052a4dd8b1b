package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// maxReadEvents caps one ReadEvents.
const maxReadEvents = 4096

// AppendEvents stores events at the end of session id's log in one
// statement (kernel.EventLog) and announces the new last seq to every
// replica listening (Notices). The fence is checked as a step's is: a
// token that is not the session's live lease's is refused
// (kernel.ErrLeaseLost), no token while another holder has a live lease
// too (kernel.ErrLeaseHeld), and nothing is appended. Appends to one
// session are serialised by the row of its counter, never by the
// session's row, so they do not wait for a step being written.
func (s *Store) AppendEvents(ctx context.Context, id string, fence uint64, events []kernel.StoredEvent) (uint64, error) {
	if err := rules.CheckID(id); err != nil {
		return 0, fmt.Errorf("append events: %w: %w", err, kernel.ErrSessionNotFound)
	}
	if len(events) == 0 {
		return 0, nil
	}
	types, times, data := eventArgs(events)
	var code string
	var first int64
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, appendSQL, id, int64(fence), types, times, data).Scan(&code, &first)
	})
	if err != nil {
		return 0, s.classify("append events to session "+id, err)
	}
	return appendAnswer(id, fence, code, first)
}

// appendSQL appends events (migrations/0002_fenced_events.sql,
// ak_append_events).
const appendSQL = `SELECT code, first FROM ak_append_events($1, $2, $3, $4, $5)`

// eventArgs are the array arguments of ak_append_events.
func eventArgs(events []kernel.StoredEvent) ([]string, []time.Time, [][]byte) {
	types := make([]string, len(events))
	times := make([]time.Time, len(events))
	data := make([][]byte, len(events))
	for i, e := range events {
		types[i], times[i], data[i] = e.Type, e.Time, e.Data
		if times[i].IsZero() {
			times[i] = time.Now()
		}
	}
	return types, times, data
}

// appendAnswer is the outcome of ak_append_events' answer.
func appendAnswer(id string, fence uint64, code string, first int64) (uint64, error) {
	switch code {
	case "ok":
		return uint64(first), nil
	case "missing":
		return 0, fmt.Errorf("append events: session %q: %w", id, kernel.ErrSessionNotFound)
	case "fenced":
		return 0, fmt.Errorf("append events to session %s: %w: token %d is not the session's live lease", id, kernel.ErrLeaseLost, fence)
	case "held":
		return 0, fmt.Errorf("append events to session %s: %w", id, kernel.ErrLeaseHeld)
	}
	return 0, fmt.Errorf("append events to session %s: unexpected answer %q from ak_append_events", id, code)
}

// commitEventsSQL stores a step and its events in one statement, so one
// round trip and one transaction: ak_commit, then, only when it answers
// ok (a select list is evaluated only for the rows its WHERE passes, and
// OFFSET 0 keeps the planner from moving the call), ak_append_events with the step's fence (a plpgsql function sees
// what the one before it wrote, so a session the step creates takes its
// events). Once the step is written, an append that does not answer ok
// would leave the step without its events: the cast of its answer to an
// integer then fails the statement, which stores nothing. It cannot
// happen while ak_commit holds the session's row with the same fence.
const commitEventsSQL = `WITH c AS MATERIALIZED (SELECT * FROM ak_commit($1, $2, $3, $4, $5, $6, $7, $8, $9))
SELECT c.code, c.last, c.holder, c.token, c.expires, (e.r).first,
       CASE WHEN c.code = 'ok' AND (e.r).code IS DISTINCT FROM 'ok'
            THEN ('ak_append_events refused the events of a stored step: ' || coalesce((e.r).code, 'no answer'))::int END
FROM c LEFT JOIN LATERAL (SELECT ak_append_events($1, $9, $10, $11, $12) AS r WHERE c.code = 'ok' OFFSET 0) e ON true`

// CommitWithEvents stores step and events in one statement, so one
// transaction and one flush of the write-ahead log instead of two
// (kernel.StepEventCommitter; commitEventsSQL). When ak_commit refuses
// (a seq conflict, a lost or held lease), nothing is stored and its error
// is returned. A failure that certainly stored nothing is retried as
// Commit's are. When the connection breaks after the statement was
// sent, the log's last events are read back: when they are these, the
// statement committed; else the error wraps ErrUnavailable and the
// caller cannot tell (as for Commit: the next Load says which).
func (s *Store) CommitWithEvents(ctx context.Context, id string, step kernel.Step, events []kernel.StoredEvent) (uint64, error) {
	if len(events) == 0 {
		return 0, s.Commit(ctx, id, step)
	}
	args, _, mfirst, err := commitArgs(ctx, id, step)
	if err != nil {
		return 0, err
	}
	types, times, data := eventArgs(events)
	args = append(args, types, times, data)
	var res commitResult
	var first *int64
	var guard *int64
	err = s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, commitEventsSQL, args...).Scan(&res.code, &res.last, &res.holder, &res.token, &res.expires, &first, &guard)
	})
	if err != nil {
		if unreachable(err) {
			if f, verr := s.eventsStored(context.WithoutCancel(ctx), id, types, data); verr == nil && f > 0 {
				return f, nil
			}
		}
		return 0, s.classify("commit session "+id, err)
	}
	if err := res.err(id, step, mfirst, len(step.Messages)); err != nil {
		return 0, err
	}
	if first == nil || *first <= 0 {
		return 0, fmt.Errorf("commit session %s: ak_append_events gave no seq", id)
	}
	return uint64(*first), nil
}

// eventsStored returns the Seq of the first of these events when they
// are the last of session id's log, else 0.
func (s *Store) eventsStored(ctx context.Context, id string, types []string, data [][]byte) (uint64, error) {
	var last int64
	if err := s.pool.QueryRow(ctx, `SELECT last_seq FROM ak_event_seq WHERE session_id = $1`, id).Scan(&last); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, nil
		}
		return 0, err
	}
	first := last - int64(len(types)) + 1
	if first < 1 {
		return 0, nil
	}
	got, err := s.ReadEvents(ctx, id, uint64(first-1), len(types))
	if err != nil || len(got) != len(types) {
		return 0, err
	}
	for i, e := range got {
		if e.Type != types[i] || !bytes.Equal(e.Data, data[i]) {
			return 0, nil
		}
	}
	return uint64(first), nil
}

// ReadEvents returns up to limit events of session id after the given Seq
// (kernel.EventLog), at most 4096.
func (s *Store) ReadEvents(ctx context.Context, id string, after uint64, limit int) ([]kernel.StoredEvent, error) {
	if rules.CheckID(id) != nil {
		return nil, nil
	}
	if limit <= 0 || limit > maxReadEvents {
		limit = maxReadEvents
	}
	var out []kernel.StoredEvent
	err := s.retry(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `SELECT seq, type, time, data FROM ak_events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
			id, int64(after), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e kernel.StoredEvent
			var seq int64
			var data []byte
			if err := rows.Scan(&seq, &e.Type, &e.Time, &data); err != nil {
				return err
			}
			e.Seq, e.Data = uint64(seq), data
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.classify("read events of session "+id, err)
	}
	return out, nil
}

var _ kernel.StepEventCommitter = (*Store)(nil)
