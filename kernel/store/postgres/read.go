package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// loadSQL reads a session in one statement, so in one snapshot: a first
// row (seq -1) with the metadata, the pending approval and the last seq,
// then the messages up to that seq.
const loadSQL = `
WITH s AS (SELECT meta, pending, last_seq FROM ak_sessions WHERE id = $1)
SELECT -1::bigint, convert_to(meta::text, 'UTF8'), convert_to(pending::text, 'UTF8'), last_seq FROM s
UNION ALL
SELECT m.seq, m.body, NULL, NULL FROM ak_messages m, s WHERE m.session_id = $1 AND m.seq <= s.last_seq
ORDER BY 1`

// Load reads session id (kernel.Store) in one statement.
func (s *Store) Load(ctx context.Context, id string) (*kernel.Session, error) {
	if rules.CheckID(id) != nil {
		return nil, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	var se *kernel.Session
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		se, err = s.load(ctx, id)
		return err
	})
	if err != nil {
		if errors.Is(err, kernel.ErrSessionNotFound) || errors.Is(err, kernel.ErrCorrupt) {
			return nil, err
		}
		return nil, s.classify("load session "+id, err)
	}
	return se, nil
}

func (s *Store) load(ctx context.Context, id string) (*kernel.Session, error) {
	rows, err := s.pool.Query(ctx, loadSQL, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var se *kernel.Session
	var last int64
	for rows.Next() {
		var seq int64
		var body, pending []byte
		var lastSeq *int64
		if err := rows.Scan(&seq, &body, &pending, &lastSeq); err != nil {
			return nil, err
		}
		if seq < 0 {
			se = &kernel.Session{}
			if err := json.Unmarshal(body, &se.Meta); err != nil {
				return nil, &kernel.CorruptError{Session: id, Part: "meta", Err: err}
			}
			if len(pending) > 0 {
				se.Pending = new(kernel.Approval)
				if err := json.Unmarshal(pending, se.Pending); err != nil {
					return nil, &kernel.CorruptError{Session: id, Part: "pending", Err: err}
				}
			}
			last = *lastSeq
			se.Meta.ID, se.Meta.LastSeq = id, uint64(last)
			se.Messages = make([]kernel.Message, 0, last)
			continue
		}
		var m kernel.Message
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, &kernel.CorruptError{Session: id, Part: "message", Seq: uint64(seq), Err: err}
		}
		if want := uint64(len(se.Messages) + 1); uint64(seq) != want {
			return nil, &kernel.CorruptError{Session: id, Part: "message", Seq: want, Err: errors.New("missing")}
		}
		m.Seq = uint64(seq)
		se.Messages = append(se.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if se == nil {
		return nil, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	if int64(len(se.Messages)) != last {
		return nil, &kernel.CorruptError{Session: id, Part: "message", Seq: uint64(len(se.Messages) + 1), Err: errors.New("missing")}
	}
	return se, nil
}

// List returns every session's metadata, most recently updated first
// (kernel.Store). A session whose metadata cannot be decoded is listed
// with its id and the kernel.LabelCorrupt label.
func (s *Store) List(ctx context.Context) ([]kernel.SessionMeta, error) {
	var out []kernel.SessionMeta
	err := s.retry(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `SELECT id, convert_to(meta::text, 'UTF8'), last_seq FROM ak_sessions ORDER BY updated DESC, id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var meta []byte
			var last int64
			if err := rows.Scan(&id, &meta, &last); err != nil {
				return err
			}
			var m kernel.SessionMeta
			if err := json.Unmarshal(meta, &m); err != nil {
				m = kernel.SessionMeta{Labels: map[string]string{kernel.LabelCorrupt: err.Error()}}
			}
			m.ID, m.LastSeq = id, uint64(last)
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.classify("list sessions", err)
	}
	return out, nil
}

// Delete removes session id with its messages, events, queued messages
// and runs, in one statement. A session another owner holds a live lease
// of is not deleted (ErrLeaseHeld): it is running.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := rules.CheckID(id); err != nil {
		return fmt.Errorf("delete session: %w: %w", err, kernel.ErrSessionNotFound)
	}
	var deleted int
	var owner *string
	var expires *time.Time
	var exists bool
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `
WITH d AS (DELETE FROM ak_sessions WHERE id = $1 AND (lease_owner IS NULL OR lease_expires <= now()) RETURNING 1)
SELECT (SELECT count(*) FROM d), s.lease_owner, s.lease_expires, s.id IS NOT NULL
FROM (SELECT 1) one LEFT JOIN ak_sessions s ON s.id = $1`, id).Scan(&deleted, &owner, &expires, &exists)
	})
	switch {
	case err != nil:
		return s.classify("delete session "+id, err)
	case deleted == 1:
		return nil
	case !exists:
		return fmt.Errorf("delete session: session %q: %w", id, kernel.ErrSessionNotFound)
	}
	he := &kernel.LeaseHeldError{SessionID: id}
	if owner != nil && expires != nil {
		he.Owner, he.Expires = *owner, *expires
	}
	return fmt.Errorf("delete session %s: %w", id, he)
}
