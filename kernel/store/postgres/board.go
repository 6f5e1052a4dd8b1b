package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/replica"
)

// The replicas' shared records (replica.Board, replica.Notifier): the
// ak_runs table, and LISTEN/NOTIFY on two channels, ak_events (sent by
// ak_append_events: "<session> <last seq>") and ak_notices (a
// replica.Notice as JSON).

// keepRuns is how many ended runs a session keeps on the board.
const keepRuns = 100

const runColumns = `id, session_id, replica, status, cancel_requested, created, convert_to(record::text, 'UTF8')`

func scanRun(row pgx.Row) (replica.Run, error) {
	var r replica.Run
	var rec []byte
	err := row.Scan(&r.ID, &r.SessionID, &r.Replica, &r.Status, &r.CancelRequested, &r.Created, &rec)
	r.Record = rec
	return r, err
}

func (s *Store) runs(ctx context.Context, op, sql string, args ...any) ([]replica.Run, error) {
	var out []replica.Run
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (replica.Run, error) { return scanRun(row) })
		return err
	})
	if err != nil {
		return nil, s.classify(op, err)
	}
	return out, nil
}

// PutRun stores r (replica.Board). A run that ended (status not
// RunRunning) is announced to every replica (replica.NoticeRun), and the
// session's oldest ended runs beyond the last 100 are dropped.
func (s *Store) PutRun(ctx context.Context, r replica.Run) error {
	if len(r.Record) == 0 {
		r.Record = json.RawMessage(`{}`)
	}
	ended := r.Status != replica.RunRunning
	err := s.retry(ctx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO ak_runs (id, session_id, replica, status, created, record) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET replica = excluded.replica, status = excluded.status, record = excluded.record`,
			r.ID, r.SessionID, r.Replica, r.Status, r.Created, string(r.Record))
		if ended {
			b.Queue(`DELETE FROM ak_runs WHERE session_id = $1 AND status <> 'running' AND id NOT IN
  (SELECT id FROM ak_runs WHERE session_id = $1 ORDER BY created DESC LIMIT $2)`, r.SessionID, keepRuns)
			n, _ := json.Marshal(replica.Notice{Kind: replica.NoticeRun, Session: r.SessionID, Run: r.ID})
			b.Queue(`SELECT pg_notify('ak_notices', $1)`, string(n))
		}
		return s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		if isFK(err) {
			return fmt.Errorf("put run %s: session %q: %w", r.ID, r.SessionID, kernel.ErrSessionNotFound)
		}
		return s.classify("put run "+r.ID, err)
	}
	return nil
}

// GetRun returns run id (replica.Board).
func (s *Store) GetRun(ctx context.Context, id string) (replica.Run, error) {
	runs, err := s.runs(ctx, "get run "+id, `SELECT `+runColumns+` FROM ak_runs WHERE id = $1`, id)
	if err != nil {
		return replica.Run{}, err
	}
	if len(runs) == 0 {
		return replica.Run{}, fmt.Errorf("run %q: %w", id, replica.ErrRunNotFound)
	}
	return runs[0], nil
}

// SessionRuns returns the session's last limit runs, oldest first
// (replica.Board).
func (s *Store) SessionRuns(ctx context.Context, sessionID string, limit int) ([]replica.Run, error) {
	return s.runs(ctx, "list runs of session "+sessionID, `SELECT * FROM (SELECT `+runColumns+` FROM ak_runs WHERE session_id = $1
ORDER BY created DESC LIMIT $2) r ORDER BY created`, sessionID, limit)
}

// ActiveRun returns the session's run in flight: running on the replica
// that holds the session's live lease (replica.Board).
func (s *Store) ActiveRun(ctx context.Context, sessionID string) (replica.Run, bool, error) {
	runs, err := s.runs(ctx, "active run of session "+sessionID, `SELECT `+runColumns+` FROM ak_runs r
WHERE r.session_id = $1 AND r.status = 'running' AND EXISTS
  (SELECT 1 FROM ak_sessions s WHERE s.id = r.session_id AND s.lease_owner = r.replica AND s.lease_expires > now())
ORDER BY r.created DESC LIMIT 1`, sessionID)
	if err != nil || len(runs) == 0 {
		return replica.Run{}, false, err
	}
	return runs[0], true, nil
}

// RequestCancel marks run id for cancelling and tells its replica
// (replica.NoticeCancel); false when the run is not in flight.
func (s *Store) RequestCancel(ctx context.Context, id string) (bool, error) {
	var marked int64
	err := s.retry(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `UPDATE ak_runs SET cancel_requested = true WHERE id = $1 AND status = 'running'`, id)
		marked = tag.RowsAffected()
		return err
	})
	if err != nil {
		return false, s.classify("cancel run "+id, err)
	}
	if marked == 0 {
		return false, nil
	}
	return true, s.Notify(ctx, replica.Notice{Kind: replica.NoticeCancel, Run: id})
}

// CancelRequests lists replica's runs in flight with a cancel request
// (replica.Board).
func (s *Store) CancelRequests(ctx context.Context, replicaName string) ([]string, error) {
	return s.strings(ctx, "list cancel requests", `SELECT id FROM ak_runs WHERE replica = $1 AND status = 'running' AND cancel_requested`, replicaName)
}

// Orphans lists the sessions left running that no live lease holds
// (replica.Board).
func (s *Store) Orphans(ctx context.Context) ([]string, error) {
	return s.strings(ctx, "list interrupted sessions",
		`SELECT id FROM ak_sessions WHERE status = 'running' AND (lease_owner IS NULL OR lease_expires <= now()) ORDER BY updated`)
}

// FollowUpsWaiting lists the sessions with a queued follow-up that no
// live lease holds (replica.Board).
func (s *Store) FollowUpsWaiting(ctx context.Context) ([]string, error) {
	return s.strings(ctx, "list waiting follow-ups", `SELECT DISTINCT q.session_id FROM ak_queue q JOIN ak_sessions s ON s.id = q.session_id
WHERE q.kind = 'followup' AND (s.lease_owner IS NULL OR s.lease_expires <= now())`)
}

// strings runs a query of one text column, retrying what is safe, and
// returns the column.
func (s *Store) strings(ctx context.Context, op, sql string, args ...any) ([]string, error) {
	var out []string
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, s.classify(op, err)
	}
	return out, nil
}

// EndOrphanRuns ends the runs still marked running whose replica does not
// hold their session's live lease (replica.Board).
func (s *Store) EndOrphanRuns(ctx context.Context, end func(replica.Run) (string, json.RawMessage)) error {
	runs, err := s.runs(ctx, "list the runs of stopped replicas", `SELECT `+runColumns+` FROM ak_runs r
WHERE r.status = 'running' AND NOT EXISTS
  (SELECT 1 FROM ak_sessions s WHERE s.id = r.session_id AND s.lease_owner = r.replica AND s.lease_expires > now())`)
	if err != nil {
		return err
	}
	for _, r := range runs {
		status, rec := end(r)
		n, _ := json.Marshal(replica.Notice{Kind: replica.NoticeRun, Session: r.SessionID, Run: r.ID})
		err := s.retry(ctx, func(ctx context.Context) error {
			b := &pgx.Batch{}
			b.Queue(`UPDATE ak_runs SET status = $2, record = $3 WHERE id = $1 AND status = 'running'`, r.ID, status, string(rec))
			b.Queue(`SELECT pg_notify('ak_notices', $1)`, string(n))
			return s.pool.SendBatch(ctx, b).Close()
		})
		if err != nil {
			return s.classify("end run "+r.ID, err)
		}
	}
	return nil
}

// Notify sends n to every replica listening (replica.Notifier).
func (s *Store) Notify(ctx context.Context, n replica.Notice) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	err = s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `SELECT pg_notify('ak_notices', $1)`, string(b))
		return err
	})
	if err != nil {
		return s.classify("notify", err)
	}
	return nil
}

// Listen calls fn with every notice until ctx ends (replica.Notifier),
// on a connection of its own (LISTEN holds one), reconnecting with a
// backoff when it breaks; after each (re)connection fn gets a
// replica.NoticeResync.
func (s *Store) Listen(ctx context.Context, fn func(replica.Notice)) error {
	wait := 100 * time.Millisecond
	for {
		err := s.listenOnce(ctx, fn, func() { wait = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.opts.Logger.Warn("listening for notices failed; reconnecting", "database", s.where, "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, fn func(replica.Notice), connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN ak_events; LISTEN ak_notices`); err != nil {
		return err
	}
	connected()
	fn(replica.Notice{Kind: replica.NoticeResync})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case "ak_events":
			id, seq, ok := strings.Cut(n.Payload, " ")
			v, err := strconv.ParseUint(seq, 10, 64)
			if ok && err == nil {
				fn(replica.Notice{Kind: replica.NoticeEvents, Session: id, Seq: v})
			}
		case "ak_notices":
			var no replica.Notice
			if json.Unmarshal([]byte(n.Payload), &no) == nil && no.Kind != "" {
				fn(no)
			}
		}
	}
}

// EventHeads returns the last event seq of each session of ids that has
// events (replica.Notifier).
func (s *Store) EventHeads(ctx context.Context, ids []string) (map[string]uint64, error) {
	out := make(map[string]uint64, len(ids))
	err := s.retry(ctx, func(ctx context.Context) error {
		clear(out)
		rows, err := s.pool.Query(ctx, `SELECT session_id, last_seq FROM ak_event_seq WHERE session_id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var last int64
			if err := rows.Scan(&id, &last); err != nil {
				return err
			}
			out[id] = uint64(last)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.classify("read event heads", err)
	}
	return out, nil
}

var (
	_ replica.Board    = (*Store)(nil)
	_ replica.Notifier = (*Store)(nil)
	_ replica.Shared   = (*Store)(nil)
)
