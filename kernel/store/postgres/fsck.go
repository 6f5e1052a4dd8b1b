package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// fsckSQL reads what Fsck checks of one session in one statement, so in
// one snapshot: a first row (seq -1) with the session row's metadata,
// pending approval, last seq and status, and its event counter and
// highest event number; then every message row, those past the last seq
// included.
const fsckSQL = `
WITH s AS (SELECT meta, pending, last_seq, status FROM ak_sessions WHERE id = $1)
SELECT -1::bigint, convert_to(s.meta::text, 'UTF8'), convert_to(s.pending::text, 'UTF8'), s.last_seq, s.status,
       coalesce((SELECT e.last_seq FROM ak_event_seq e WHERE e.session_id = $1), 0),
       coalesce((SELECT max(e.seq) FROM ak_events e WHERE e.session_id = $1), 0)
FROM s
UNION ALL
SELECT m.seq, m.body, NULL, NULL, NULL, NULL, NULL FROM ak_messages m WHERE m.session_id = $1
ORDER BY 1`

// Fsck checks the sessions ids (every session when ids is empty)
// (kernel.StoreChecker). PostgreSQL checksums its pages itself (when the
// cluster has data checksums on); what Fsck checks is what the rows say
// to each other: the metadata and the pending approval decode; every
// message 1..last_seq is there and decodes; no message row lies past
// last_seq (a step is stored whole or not at all, so one there was
// written by hand); the status column, which the list of running
// sessions reads, is the metadata's; no event is numbered past the
// session's event counter (the next append would collide); and a session
// that reads whole keeps the pairing of calls and results
// (kernel.CheckHistory).
//
// With repair, each damaged message is replaced by the placeholder Load
// would need (badger.Placeholders, as the badger store's fsck stores),
// rows past last_seq are deleted, the status column and the event
// counter are set from what they disagree with, all in one transaction
// per session. A session another holder has a live lease of (it is
// running) is not repaired; nor is damaged metadata or a broken pairing,
// which are only reported.
func (s *Store) Fsck(ctx context.Context, ids []string, repair bool) (*kernel.FsckReport, error) {
	rep := &kernel.FsckReport{}
	all := len(ids) == 0
	if all {
		var err error
		if ids, err = s.strings(ctx, "fsck: list sessions", `SELECT id FROM ak_sessions ORDER BY id`); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		f, err := s.fsckSession(ctx, id, repair)
		if all && errors.Is(err, kernel.ErrSessionNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return rep, fmt.Errorf("fsck: %w", err)
		}
		rep.Sessions = append(rep.Sessions, *f)
	}
	return rep, nil
}

// fsckRead is one session as fsckSQL reads it.
type fsckRead struct {
	meta, pending  []byte
	last           int64
	status         string
	evLast, evTop  int64
	seqs           []int64
	bodies         [][]byte
	found          bool
	leftovers      bool // message rows outside 1..last
	statusMismatch bool
	eventsAhead    bool
}

func (s *Store) readFsck(ctx context.Context, id string) (*fsckRead, error) {
	var r *fsckRead
	err := s.retry(ctx, func(ctx context.Context) error {
		r = &fsckRead{}
		rows, err := s.pool.Query(ctx, fsckSQL, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			var body, pending []byte
			var last, evLast, evTop *int64
			var status *string
			if err := rows.Scan(&seq, &body, &pending, &last, &status, &evLast, &evTop); err != nil {
				return err
			}
			if last != nil { // the session row (its seq -1 sorts first)
				r.found, r.meta, r.pending, r.last, r.status, r.evLast, r.evTop = true, body, pending, *last, *status, *evLast, *evTop
				continue
			}
			r.seqs, r.bodies = append(r.seqs, seq), append(r.bodies, body)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.classify("fsck session "+id, err)
	}
	if !r.found {
		return nil, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	return r, nil
}

func (s *Store) fsckSession(ctx context.Context, id string, repair bool) (*kernel.FsckSession, error) {
	if err := rules.CheckID(id); err != nil {
		return nil, fmt.Errorf("%w: %w", err, kernel.ErrSessionNotFound)
	}
	r, err := s.readFsck(ctx, id)
	if err != nil {
		return nil, err
	}
	f := &kernel.FsckSession{ID: id}
	var meta kernel.SessionMeta
	if r.last < 0 {
		// Nothing to number messages by, and no repair: only rm helps.
		f.Meta = &kernel.CorruptError{Session: id, Part: "meta", Err: fmt.Errorf("last_seq is %d", r.last)}
		r.last = 0
	} else if err := json.Unmarshal(r.meta, &meta); err != nil {
		f.Meta = &kernel.CorruptError{Session: id, Part: "meta", Err: err}
	} else if string(meta.Status) != r.status {
		r.statusMismatch = true
		f.Problems = append(f.Problems, kernel.FsckProblem{Text: fmt.Sprintf("the row's status column says %q, its metadata %q (the list of running sessions reads the column)", r.status, meta.Status)})
	}
	var pending *kernel.Approval
	if len(r.pending) > 0 {
		pending = new(kernel.Approval)
		if err := json.Unmarshal(r.pending, pending); err != nil {
			f.Pending = &kernel.CorruptError{Session: id, Part: "pending", Err: err}
		}
	}
	if r.evTop > r.evLast {
		r.eventsAhead = true
		f.Problems = append(f.Problems, kernel.FsckProblem{Text: fmt.Sprintf("events are numbered up to %d, past the session's event counter %d: the next append would collide", r.evTop, r.evLast)})
	}
	msgs := make([]kernel.Message, r.last)
	for i := range msgs {
		msgs[i].Seq = uint64(i + 1)
	}
	seen := make([]bool, r.last)
	for i, seq := range r.seqs {
		if seq < 1 || seq > r.last {
			r.leftovers = true
			f.Problems = append(f.Problems, kernel.FsckProblem{Seq: uint64(max(seq, 0)),
				Text: fmt.Sprintf("a message row with seq %d, outside the session's 1..%d: a step is stored whole, so it was written by other means; Load never reads it", seq, r.last)})
			continue
		}
		f.Messages++
		seen[seq-1] = true
		m := &msgs[seq-1]
		if err := decodeBody(r.bodies[i], m); err != nil {
			damage(f, uint64(seq), fmt.Sprintf("does not decode: %v", err))
		}
		m.Seq = uint64(seq)
	}
	for i, ok := range seen {
		if !ok {
			damage(f, uint64(i+1), "missing from the store")
		}
	}
	fixable := len(f.Problems) // those above are what repairSession fixes
	if len(f.Damaged) == 0 && f.Meta == nil && f.Pending == nil {
		f.Problems = append(f.Problems, kernel.CheckHistory(msgs, pending)...)
	}
	if !repair || f.Meta != nil || len(f.Damaged) == 0 && !r.leftovers && !r.statusMismatch && !r.eventsAhead {
		return f, nil
	}
	if err := s.repairSession(ctx, id, r, msgs, f, meta.Status); err != nil {
		var held *kernel.LeaseHeldError
		switch {
		case errors.As(err, &held):
			f.Problems = append(f.Problems, kernel.FsckProblem{Text: fmt.Sprintf("not repaired: %v", held)})
			return f, nil
		case errors.Is(err, errChanged):
			f.Problems = append(f.Problems, kernel.FsckProblem{Text: "not repaired: a step was stored while it was checked; run fsck again"})
			return f, nil
		}
		return nil, err
	}
	f.Repaired = len(f.Damaged) > 0
	for i := range f.Problems[:fixable] {
		f.Problems[i].Repaired = true
	}
	return f, nil
}

// errChanged is repairSession's: the session has more messages than when
// it was checked.
var errChanged = errors.New("session changed while checked")

// repairSession stores what fsckSession found repairable, in one
// transaction that holds the session's row: placeholders for the damaged
// messages (msgs has them in place afterwards), no rows outside 1..last,
// the status column from the metadata, the event counter from the events;
// the session's segments go when a row changes.
func (s *Store) repairSession(ctx context.Context, id string, r *fsckRead, msgs []kernel.Message, f *kernel.FsckSession, status kernel.Status) error {
	var bodies [][]byte
	var seqs []int64
	if len(f.Damaged) > 0 {
		for _, q := range rules.Placeholders(msgs, f.Damaged) {
			seqs, bodies = append(seqs, int64(q)), append(bodies, encodeBody(&msgs[q-1]))
		}
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var last int64
			var holder *string
			var live bool
			var held kernel.LeaseHeldError
			err := tx.QueryRow(ctx, `SELECT last_seq, lease_owner, coalesce(lease_expires, now()), coalesce(lease_expires > now(), false)
FROM ak_sessions WHERE id = $1 FOR UPDATE`, id).Scan(&last, &holder, &held.Expires, &live)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
			}
			if err != nil {
				return err
			}
			if last != r.last {
				return errChanged
			}
			if live && holder != nil {
				held.SessionID, held.Holder = id, *holder
				return &held
			}
			b := &pgx.Batch{}
			if len(seqs) > 0 {
				b.Queue(`INSERT INTO ak_messages (session_id, seq, body) SELECT $1, q, b FROM unnest($2::bigint[], $3::bytea[]) AS t(q, b)
ON CONFLICT (session_id, seq) DO UPDATE SET body = EXCLUDED.body`, id, seqs, bodies)
			}
			if r.leftovers {
				b.Queue(`DELETE FROM ak_messages WHERE session_id = $1 AND (seq < 1 OR seq > $2)`, id, last)
			}
			if len(seqs) > 0 || r.leftovers {
				// The segments copy the rows as they were: Load would
				// read them and not the repair. The next commit that
				// completes a chunk packs the rows again.
				b.Queue(`DELETE FROM ak_segments WHERE session_id = $1`, id)
			}
			if r.statusMismatch {
				b.Queue(`UPDATE ak_sessions SET status = $2 WHERE id = $1`, id, string(status))
			}
			if r.eventsAhead {
				b.Queue(`INSERT INTO ak_event_seq AS e (session_id, last_seq) SELECT $1, max(seq) FROM ak_events WHERE session_id = $1
ON CONFLICT (session_id) DO UPDATE SET last_seq = greatest(e.last_seq, EXCLUDED.last_seq)`, id)
			}
			return tx.SendBatch(ctx, b).Close()
		})
	})
	var held *kernel.LeaseHeldError
	if err == nil || errors.Is(err, errChanged) || errors.As(err, &held) || errors.Is(err, kernel.ErrSessionNotFound) {
		return err
	}
	return s.classify("repair session "+id, err)
}

// damage records that message seq of f cannot be read, and why.
func damage(f *kernel.FsckSession, seq uint64, why string) {
	if f.Damaged == nil {
		f.Damaged = map[uint64]string{}
	}
	f.Damaged[seq] = why
}
