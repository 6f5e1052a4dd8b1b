// Package replica is what several processes serving the same sessions
// share through their store: the replicas of `kernel serve` on one
// PostgreSQL database. Each contract here is something a single process
// keeps in memory or in files (the run records of kernel serve, its
// cancellation signals, its wake-ups, the steering queue directory) and
// that must be a store record once two processes serve the sessions.
//
// A store that several replicas open at once implements Shared
// (kernel/store/postgres); package serve uses it when the store does, and
// keeps everything in process otherwise. Only cmd/kernel wires the two
// together.
//
// Who runs a session is its lease (kernel.Leaser): a run holds its
// session's lease from start to end, so a run is "in flight" only while
// its replica holds that lease. A replica that dies loses its leases
// after their ttl, and its runs stop counting as in flight.
package replica

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/queue"
)

// ErrRunNotFound is returned for a run id no replica recorded.
var ErrRunNotFound = errors.New("run not found")

// RunRunning is the Status of a run in flight.
const RunRunning = "running"

// Run is a run as every replica sees it.
type Run struct {
	ID        string
	SessionID string
	// Replica names the replica that runs (or ran) it.
	Replica string
	// Status is RunRunning while the run is in flight; the front end's
	// own words after.
	Status string
	// CancelRequested is set by RequestCancel.
	CancelRequested bool
	Created         time.Time
	// Record is the front end's own record of the run, as JSON; the
	// store keeps it as it is.
	Record json.RawMessage
}

// Board keeps every replica's runs.
//
// PutRun stores r (insert or replace); a replica puts a run when it
// starts and again when it ends. GetRun returns run id (ErrRunNotFound).
// SessionRuns returns the session's last limit runs, oldest first.
// ActiveRun returns the session's run in flight: status RunRunning on a
// replica that holds the session's lease. RequestCancel asks the replica
// running run id to cancel it (it reports false when the run is not in
// flight); CancelRequests lists replica's runs in flight with a cancel
// request (what it polls when a notice is lost). Orphans lists the
// sessions a run left running (kernel.StatusRunning) that no live lease
// holds: their replica stopped, or drained, and a replica may continue
// them (kernel.Kernel.Continue). FollowUpsWaiting lists the sessions
// with a queued follow-up that no live lease holds (nobody will take it
// when a run ends). EndOrphanRuns marks the runs still RunRunning whose
// replica no longer holds their session's lease as ended, with the status
// and record end returns for each (their replica will never say so).
type Board interface {
	PutRun(ctx context.Context, r Run) error
	GetRun(ctx context.Context, id string) (Run, error)
	SessionRuns(ctx context.Context, sessionID string, limit int) ([]Run, error)
	ActiveRun(ctx context.Context, sessionID string) (Run, bool, error)
	RequestCancel(ctx context.Context, id string) (bool, error)
	CancelRequests(ctx context.Context, replica string) ([]string, error)
	Orphans(ctx context.Context) ([]string, error)
	FollowUpsWaiting(ctx context.Context) ([]string, error)
	EndOrphanRuns(ctx context.Context, end func(Run) (status string, record json.RawMessage)) error
}

// RunClaimer is a Board that can take a session's lease for a run and
// record the run in one write: ClaimRun is kernel.Leaser's AcquireLease
// for run.SessionID and run.Replica, then PutRun(run), all or nothing
// (when the lease is held, nothing is recorded). A server uses it to
// start a run with one sync instead of two (PostgreSQL).
type RunClaimer interface {
	ClaimRun(ctx context.Context, run Run, ttl time.Duration) (kernel.Lease, error)
}

// The kinds of Notice.
const (
	// NoticeEvents: session's event log grew to Seq (its store sends it
	// with every append).
	NoticeEvents = "events"
	// NoticeInbox: Owner's pending approvals may have changed.
	NoticeInbox = "inbox"
	// NoticeRun: run Run of Session ended.
	NoticeRun = "run"
	// NoticeCancel: run Run was asked to cancel (RequestCancel sends it).
	NoticeCancel = "cancel"
	// NoticeFollowUp: a follow-up was queued for Session.
	NoticeFollowUp = "followup"
	// NoticeResync: the listener (re)connected; notices sent while it was
	// away are lost, so listeners look at what they watch again.
	NoticeResync = "resync"
)

// Notice is a change one replica tells the others about.
type Notice struct {
	Kind    string `json:"k"`
	Session string `json:"s,omitempty"`
	Seq     uint64 `json:"q,omitempty"`
	Owner   string `json:"o,omitempty"`
	Run     string `json:"r,omitempty"`
}

// Notifier carries notices between replicas. Notify sends n to every
// replica listening (the sender included). Listen calls fn with each
// notice until ctx ends, reconnecting when its connection breaks; after
// each (re)connection it calls fn with a NoticeResync. Notices are
// best-effort wake-ups: every listener also polls (EventHeads), so a lost
// notice costs a delay, never a missed change. EventHeads returns the
// last event seq of each of the sessions ids that has events.
type Notifier interface {
	Notify(ctx context.Context, n Notice) error
	Listen(ctx context.Context, fn func(Notice)) error
	EventHeads(ctx context.Context, ids []string) (map[string]uint64, error)
}

// Queue is the steering and follow-up queue of kernel.Inbox with what
// front ends add, list and cancel; *queue.Dir is the one-host queue (a
// directory beside a Badger store), and a Shared store's Queue keeps the
// messages in the database. Every method is bounded by its ctx.
//
// Add queues text for session as kind (queue.Steer or queue.FollowUp).
// List returns the session's queued messages (not those being delivered),
// oldest first; Cancel removes one before it is delivered
// (queue.ErrNotQueued otherwise). TakeFollowUp takes the session's oldest
// follow-up, or nil, for the caller to run with kernel.Kernel.RunQueued:
// the message stays in the queue, taken, until Delivered removes it once
// its prompt is stored, so a process that stops in between leaves it for
// the next taker, and RunQueued skips one the session already holds: a
// follow-up runs exactly once. Waiting lists the sessions with a
// follow-up queued or taken.
type Queue interface {
	kernel.Inbox
	Add(ctx context.Context, session, text, kind string) (queue.Entry, error)
	List(ctx context.Context, session string) ([]queue.Entry, error)
	Cancel(ctx context.Context, session, id string) error
	TakeFollowUp(ctx context.Context, session string) (*queue.Entry, error)
	Waiting(ctx context.Context) ([]string, error)
}

// Shared is a store that several replicas open at once: sessions
// (kernel.Store, with events and leases), the runs of every replica, the
// notices between them, and the queue. Queue returns the queue as seen by
// replica (it claims steering messages in that name).
type Shared interface {
	kernel.Store
	kernel.EventLog
	kernel.Leaser
	Board
	Notifier
	Queue(replica string) Queue
}

var _ Queue = (*queue.Dir)(nil)
