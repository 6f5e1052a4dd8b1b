package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/export"
)

// Export writes session id in the export format every store shares
// (schemas/session-export.schema.json): byte for byte what the badger
// store writes for the same session, so a session moved between the two
// compares equal.
func (s *Store) Export(ctx context.Context, id string, w io.Writer) error {
	se, err := s.Load(ctx, id)
	if err != nil {
		return fmt.Errorf("export session: %w", err)
	}
	return export.Write(ctx, w, se)
}

// Import reads a session an Export (of any store) wrote, checks all of it
// (export.Read: a problem names the line), and stores it under the
// id of its header (a new id when it has none) in one transaction. A
// session with that id already stored fails with kernel.ErrSessionExists, and
// nothing is written.
func (s *Store) Import(ctx context.Context, r io.Reader) (string, error) {
	se, err := export.Read(ctx, r)
	if err != nil {
		return "", err
	}
	id := se.Meta.ID
	if id == "" {
		id = kernel.NewID()
	}
	meta := se.Meta
	meta.ID, meta.LastSeq = id, 0
	metaJSON, err := json.Marshal(&meta)
	if err != nil {
		return "", fmt.Errorf("import session %s: %w", id, err)
	}
	var pending []byte
	if se.Pending != nil {
		se.Pending.SessionID = id
		if pending, err = json.Marshal(se.Pending); err != nil {
			return "", fmt.Errorf("import session %s: %w", id, err)
		}
	}
	rows := make([][]any, len(se.Messages))
	for i := range se.Messages {
		rows[i] = []any{id, int64(i + 1), encodeBody(&se.Messages[i])}
	}
	updated := meta.Updated
	if updated.IsZero() {
		updated = time.Now()
	}
	err = s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO ak_sessions (id, meta, pending, last_seq, status, updated) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO NOTHING`, id, metaJSON, nullJSON(pending), int64(len(rows)), string(meta.Status), updated)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("session %q: %w (remove it first)", id, kernel.ErrSessionExists)
			}
			if _, err = tx.CopyFrom(ctx, pgx.Identifier{"ak_messages"}, []string{"session_id", "seq", "body"}, pgx.CopyFromRows(rows)); err != nil {
				return err
			}
			// Its segments (migrations/0005_segments.sql), as a commit of
			// these messages would write them.
			_, err = tx.Exec(ctx, `SELECT ak_pack($1, $2)`, id, int64(len(rows)))
			return err
		})
	})
	if err != nil {
		return "", s.classify("import session", err)
	}
	return id, nil
}

// GC deletes every session not updated for olderThan and not leased (a
// running session is kept), with its messages, events, queued messages
// and runs. It returns the deleted sessions' ids, sorted.
func (s *Store) GC(ctx context.Context, olderThan time.Duration) ([]string, error) {
	if olderThan < 0 {
		return nil, fmt.Errorf("gc: negative age %s", olderThan)
	}
	removed, err := s.strings(ctx, "gc", `DELETE FROM ak_sessions
WHERE updated < $1 AND (lease_owner IS NULL OR lease_expires <= now()) RETURNING id`, time.Now().Add(-olderThan))
	if err != nil {
		return nil, err
	}
	slices.Sort(removed)
	return removed, nil
}
