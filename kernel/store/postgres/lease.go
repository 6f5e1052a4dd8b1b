package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/kernel/store/internal/rules"
)

// The session leases (kernel.Leaser) are three columns of the session's
// row: lease_owner, lease_token and lease_expires. Every statement that
// grants, renews, releases or checks a lease takes the row's lock and
// compares with the database's clock (now()), so the replicas' clocks do
// not matter, and a step write (ak_commit) and a takeover of the same
// session are ordered: the write either lands before the new token
// exists, or sees it and is refused.
// Why: RATIONALE.md, "One writer per session: a lease row with a fencing
// token".

// grantLeaseSQL grants session $1's lease to $2 for $3 µs, when free;
// leaseAnswerSQL answers (granted, token, holder, expires) from it.
const (
	grantLeaseSQL = `
  UPDATE ak_sessions SET lease_owner = $2, lease_token = lease_token + 1, lease_expires = now() + $3 * interval '1 microsecond'
  WHERE id = $1 AND (lease_owner IS NULL OR lease_expires <= now())
  RETURNING lease_token, lease_expires`
	leaseAnswerSQL = `SELECT true, g.lease_token, NULL, g.lease_expires FROM g
UNION ALL
SELECT false, s.lease_token, s.lease_owner, s.lease_expires FROM ak_sessions s WHERE s.id = $1 AND NOT EXISTS (SELECT 1 FROM g)`
)

// AcquireLease grants session id's lease to holder for ttl with a new token
// (kernel.Leaser).
func (s *Store) AcquireLease(ctx context.Context, id, holder string, ttl time.Duration) (kernel.Lease, error) {
	return s.acquireLease(ctx, id, holder, ttl, nil)
}

// ClaimRun grants run's session's lease to run.Replica for ttl, as
// AcquireLease does, and records run on the board in the same statement
// (replica.RunClaimer): one round trip and one WAL flush where the two
// calls took two of each. When the lease is held, nothing is recorded.
// Why: RATIONALE.md, "A run's end rides its last step (issue 45)".
func (s *Store) ClaimRun(ctx context.Context, run replica.Run, ttl time.Duration) (kernel.Lease, error) {
	if len(run.Record) == 0 {
		run.Record = json.RawMessage(`{}`)
	}
	return s.acquireLease(ctx, run.SessionID, run.Replica, ttl, &run)
}

// acquireLease is AcquireLease, recording run (when set) once granted.
func (s *Store) acquireLease(ctx context.Context, id, holder string, ttl time.Duration, run *replica.Run) (kernel.Lease, error) {
	if err := rules.CheckID(id); err != nil {
		return kernel.Lease{}, fmt.Errorf("acquire lease: %w: %w", err, kernel.ErrSessionNotFound)
	}
	if holder == "" {
		return kernel.Lease{}, errors.New("acquire lease: empty holder")
	}
	l := kernel.Lease{SessionID: id, Holder: holder}
	var token int64
	var current *string
	var expires *time.Time
	var got bool
	err := s.retry(ctx, func(ctx context.Context) error {
		if run != nil {
			return s.pool.QueryRow(ctx, `
WITH g AS (`+grantLeaseSQL+`),
r AS (
  INSERT INTO ak_runs (id, session_id, replica, status, created, record)
  SELECT $4::text, $1, $2, $5::text, $6::timestamptz, $7::json FROM g
  ON CONFLICT (id) DO UPDATE SET replica = excluded.replica, status = excluded.status, record = excluded.record)
`+leaseAnswerSQL, id, holder, ttl.Microseconds(), run.ID, run.Status, run.Created, string(run.Record)).Scan(&got, &token, &current, &expires)
		}
		return s.pool.QueryRow(ctx, `WITH g AS (`+grantLeaseSQL+`)
`+leaseAnswerSQL, id, holder, ttl.Microseconds()).Scan(&got, &token, &current, &expires)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return l, fmt.Errorf("acquire lease: session %q: %w", id, kernel.ErrSessionNotFound)
	case err != nil:
		return l, s.classify("acquire lease of session "+id, err)
	case !got:
		he := &kernel.LeaseHeldError{SessionID: id}
		if current == nil {
			// A racing acquirer won after this statement's snapshot: ask
			// again who holds it.
			_ = s.pool.QueryRow(ctx, `SELECT lease_owner, lease_expires FROM ak_sessions WHERE id = $1`, id).Scan(&current, &expires)
		}
		if current != nil && expires != nil {
			he.Holder, he.Expires = *current, *expires
		}
		return l, fmt.Errorf("acquire lease: %w", he)
	}
	l.Token, l.Expires = uint64(token), *expires
	return l, nil
}

// RenewLease extends l for ttl from now while it is still held
// (kernel.Leaser).
func (s *Store) RenewLease(ctx context.Context, l kernel.Lease, ttl time.Duration) (kernel.Lease, error) {
	var expires time.Time
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `
UPDATE ak_sessions SET lease_expires = now() + $4 * interval '1 microsecond'
WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires > now()
RETURNING lease_expires`, l.SessionID, l.Holder, int64(l.Token), ttl.Microseconds()).Scan(&expires)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return l, fmt.Errorf("renew lease of session %s: %w", l.SessionID, kernel.ErrLeaseLost)
	case err != nil:
		return l, s.classify("renew lease of session "+l.SessionID, err)
	}
	l.Expires = expires
	return l, nil
}

// ReleaseLease gives l up if it is still held (kernel.Leaser). The token
// stays: the next grant takes a larger one.
//
// The release commits without waiting for its WAL flush
// (synchronous_commit off for its own transaction only). Nothing is
// acknowledged by a release, and losing it is safe: if the database
// crashes before the WAL writer (or any later commit) flushes it, the
// lease is still held by l's holder after recovery, with the same token,
// and lapses by itself at its expiry, as when a release fails. A grant
// that follows the release is a synchronous commit later in the WAL, so
// it is never durable without the release. Why: RATIONALE.md, "What a run
// through kernel serve waits for (issue 45)".
func (s *Store) ReleaseLease(ctx context.Context, l kernel.Lease) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, releaseLeaseSQL, l.SessionID, l.Holder, int64(l.Token))
		return err
	})
	if err != nil {
		return s.classify("release lease of session "+l.SessionID, err)
	}
	return nil
}

// releaseLeaseSQL frees a lease still held with its token, in a
// transaction that does not wait for its WAL flush (set_config with
// is_local: for this statement's transaction only; the join makes it run
// before the row is written).
const releaseLeaseSQL = `WITH o AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE ak_sessions SET lease_owner = NULL, lease_expires = NULL
FROM o WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`
