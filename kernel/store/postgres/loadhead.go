package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/jackc/pgx/v5"
)

// loadHeadSQL is loadSQL's first row alone: the session's metadata, its
// pending approval and its last seq, one row by primary key, no segment
// or message read.
const loadHeadSQL = `SELECT convert_to(meta::text, 'UTF8'), convert_to(pending::text, 'UTF8'), last_seq FROM ak_sessions WHERE id = $1`

// LoadHead is Load without the messages (kernel.SessionHeadLoader): one
// statement that reads the session's row and nothing else, so its cost
// does not grow with the session. `kernel serve` checks a run's owner and
// pending approval with it twice per run (the 202 and the stream's
// start). Why: RATIONALE.md, "A run through kernel serve, third round
// (issue 45)".
func (s *Store) LoadHead(ctx context.Context, id string) (*kernel.Session, error) {
	return s.read(ctx, id, func(ctx context.Context) (*kernel.Session, error) {
		var meta, pending []byte
		var last int64
		err := s.pool.QueryRow(ctx, loadHeadSQL, id).Scan(&meta, &pending, &last)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
		}
		if err != nil {
			return nil, err
		}
		return decodeHead(id, meta, pending, last)
	})
}

// decodeHead decodes a session row's metadata and pending approval, as
// Load and LoadHead both read them.
func decodeHead(id string, meta, pending []byte, last int64) (*kernel.Session, error) {
	se := &kernel.Session{}
	if err := json.Unmarshal(meta, &se.Meta); err != nil {
		return nil, &kernel.CorruptError{Session: id, Part: "meta", Err: err}
	}
	if len(pending) > 0 {
		se.Pending = new(kernel.Approval)
		if err := json.Unmarshal(pending, se.Pending); err != nil {
			return nil, &kernel.CorruptError{Session: id, Part: "pending", Err: err}
		}
	}
	se.Meta.ID, se.Meta.LastSeq = id, uint64(last)
	return se, nil
}
