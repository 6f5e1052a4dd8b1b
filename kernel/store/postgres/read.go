package postgres

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// loadSQL reads a session in one statement, so in one snapshot: a row
// (seq -1) with the metadata, the pending approval and the last seq; the
// session's segments (migrations/0005_segments.sql), each a row of its
// first seq, its body and its last seq; and the message rows past the
// last segment, up to the last seq. A resume of 10,000 messages reads 39
// segments and 16 rows where it read 10,000 rows: the server's cost and
// the protocol's are per row (RATIONALE.md, "PostgreSQL resume: packed
// segments beside the message rows (issue 45)"). It has no ORDER BY:
// load puts each message at its seq itself.
const loadSQL = `
WITH s AS (SELECT meta, pending, last_seq FROM ak_sessions WHERE id = $1),
p AS (SELECT coalesce(max(g.last_seq), 0) AS packed FROM ak_segments g, s WHERE g.session_id = $1 AND g.last_seq <= s.last_seq)
SELECT -1::bigint, convert_to(meta::text, 'UTF8'), convert_to(pending::text, 'UTF8'), last_seq FROM s
UNION ALL
SELECT g.first_seq, g.body, NULL, g.last_seq FROM ak_segments g, s WHERE g.session_id = $1 AND g.last_seq <= s.last_seq
UNION ALL
SELECT m.seq, m.body, NULL, NULL FROM ak_messages m, s, p WHERE m.session_id = $1 AND m.seq > p.packed AND m.seq <= s.last_seq`

// loadRowsSQL is loadSQL without the segments: every message from its
// row, the source of truth, which Load falls back to when a segment does
// not read.
const loadRowsSQL = `
WITH s AS (SELECT meta, pending, last_seq FROM ak_sessions WHERE id = $1)
SELECT -1::bigint, convert_to(meta::text, 'UTF8'), convert_to(pending::text, 'UTF8'), last_seq FROM s
UNION ALL
SELECT m.seq, m.body, NULL, NULL FROM ak_messages m, s WHERE m.session_id = $1 AND m.seq <= s.last_seq`

// Load reads session id (kernel.Store) in one statement.
func (s *Store) Load(ctx context.Context, id string) (*kernel.Session, error) {
	return s.read(ctx, id, func(ctx context.Context) (*kernel.Session, error) {
		se, err := s.load(ctx, id, loadSQL)
		if errors.Is(err, errSegment) {
			se, err = s.load(ctx, id, loadRowsSQL)
		}
		return se, err
	})
}

// read is what Load and LoadHead share: an invalid id is not found, fn
// is retried while the database is unreachable, and its errors other
// than not found and corrupt are classified.
func (s *Store) read(ctx context.Context, id string, fn func(context.Context) (*kernel.Session, error)) (*kernel.Session, error) {
	if rules.CheckID(id) != nil {
		return nil, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	var se *kernel.Session
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		se, err = fn(ctx)
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

// errSegment is load's when a segment does not read, or the segments and
// the rows together do not hold each message once: Load reads the rows.
var errSegment = errors.New("a segment does not read")

func (s *Store) load(ctx context.Context, id, sql string) (*kernel.Session, error) {
	rows, err := s.pool.Query(ctx, sql, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var se *kernel.Session
	var last int64
	var msgs []kernel.Message
	sorted, segments := true, false
	for rows.Next() {
		var seq int64
		var segLast *int64
		if err := rows.Scan(&seq, nil, nil, &segLast); err != nil {
			return nil, err
		}
		if seq < 0 {
			var meta, pending []byte
			if err := rows.Scan(nil, &meta, &pending, &last); err != nil {
				return nil, err
			}
			if se, err = decodeHead(id, meta, pending, last); err != nil {
				return nil, err
			}
			if msgs == nil {
				msgs = make([]kernel.Message, 0, last)
			}
			continue
		}
		// The body's bytes as received, valid until the next row: the
		// decoder copies what it keeps.
		body := rows.RawValues()[1]
		if segLast != nil {
			segments = true
			if msgs, err = appendSegment(msgs, body, seq, *segLast); err != nil {
				return nil, err
			}
		} else {
			msgs = append(msgs, kernel.Message{})
			m := &msgs[len(msgs)-1]
			if err := decodeBody(body, m); err != nil {
				return nil, &kernel.CorruptError{Session: id, Part: "message", Seq: uint64(seq), Err: err}
			}
			m.Seq = uint64(seq)
		}
		if n := len(msgs); n > 1 && msgs[n-2].Seq > msgs[n-1].Seq {
			sorted = false
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if se == nil {
		return nil, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	if !sorted {
		// Messages are in order within a segment, so sorting by seq
		// orders them all.
		slices.SortStableFunc(msgs, func(a, b kernel.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	for i := range msgs {
		if want := uint64(i + 1); msgs[i].Seq != want {
			if segments {
				return nil, errSegment
			}
			return nil, &kernel.CorruptError{Session: id, Part: "message", Seq: want, Err: errors.New("missing")}
		}
	}
	if int64(len(msgs)) != last {
		if segments {
			return nil, errSegment
		}
		return nil, &kernel.CorruptError{Session: id, Part: "message", Seq: uint64(len(msgs) + 1), Err: errors.New("missing")}
	}
	se.Messages = msgs
	return se, nil
}

// appendSegment appends the messages first..last of a segment's body
// (each the 4-byte big-endian length of its row's body, then the body) to
// msgs. Any fault is errSegment.
func appendSegment(msgs []kernel.Message, b []byte, first, last int64) ([]kernel.Message, error) {
	if first < 1 || last < first {
		return nil, errSegment
	}
	for seq := first; seq <= last; seq++ {
		if len(b) < 4 {
			return nil, errSegment
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return nil, errSegment
		}
		msgs = append(msgs, kernel.Message{})
		m := &msgs[len(msgs)-1]
		if err := decodeBody(b[4:4+n], m); err != nil {
			return nil, errSegment
		}
		m.Seq = uint64(seq)
		b = b[4+n:]
	}
	if len(b) != 0 {
		return nil, errSegment
	}
	return msgs, nil
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
// and runs, in one statement. A session another holder has a live lease
// of is not deleted (ErrLeaseHeld): it is running.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := rules.CheckID(id); err != nil {
		return fmt.Errorf("delete session: %w: %w", err, kernel.ErrSessionNotFound)
	}
	var deleted int
	var holder *string
	var expires *time.Time
	var exists bool
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `
WITH d AS (DELETE FROM ak_sessions WHERE id = $1 AND (lease_owner IS NULL OR lease_expires <= now()) RETURNING 1)
SELECT (SELECT count(*) FROM d), s.lease_owner, s.lease_expires, s.id IS NOT NULL
FROM (SELECT 1) one LEFT JOIN ak_sessions s ON s.id = $1`, id).Scan(&deleted, &holder, &expires, &exists)
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
	if holder != nil && expires != nil {
		he.Holder, he.Expires = *holder, *expires
	}
	return fmt.Errorf("delete session %s: %w", id, he)
}
