package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// maxReadEvents caps one ReadEvents.
const maxReadEvents = 4096

// AppendEvents stores events at the end of session id's log in one
// statement (kernel.EventLog) and announces the new last seq to every
// replica listening (Notices). The fence is checked as a step's is: a
// token that is not the session's live lease's is refused
// (kernel.ErrLeaseLost), no token while another owner holds a live lease
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
	types := make([]string, len(events))
	times := make([]time.Time, len(events))
	data := make([][]byte, len(events))
	for i, e := range events {
		types[i], times[i], data[i] = e.Type, e.Time, e.Data
		if times[i].IsZero() {
			times[i] = time.Now()
		}
	}
	var code string
	var first int64
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT code, first FROM ak_append_events($1, $2, $3, $4, $5)`, id, int64(fence), types, times, data).Scan(&code, &first)
	})
	if err != nil {
		return 0, s.classify("append events to session "+id, err)
	}
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
