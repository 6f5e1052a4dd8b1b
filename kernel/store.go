package kernel

import (
	"context"
	"io"
	"time"
)

// Session is a stored conversation.
type Session struct {
	Meta     SessionMeta
	Messages []Message
	// Pending is the approval the session waits for, or nil.
	Pending *Approval
}

// Step is one atomic, durable write: the messages of one loop step (the user
// prompt, an assistant message, or all tool results of one round) together
// with the session's new metadata and approval state.
type Step struct {
	// Messages carry consecutive Seq values continuing the session's LastSeq.
	Messages []Message
	// Meta replaces the stored metadata. Its LastSeq is ignored: the store
	// sets it to the Seq of the last message it holds.
	Meta SessionMeta
	// Pending, when non-nil, becomes the session's pending approval.
	Pending *Approval
	// ClearPending removes the pending approval.
	ClearPending bool
	// History, when set, is the session's whole history after this step:
	// the messages the store holds, then Messages (its last len(Messages)
	// elements are Messages itself, the same array). Its writer never
	// writes any of its elements again, so a store that keeps messages in
	// memory may keep History instead of copying them; it must not write
	// to History's spare capacity either. Stores that serialise the step
	// ignore it. The kernel sets it on every step but a direct session's
	// (which reuses its array).
	// Why: RATIONALE.md, "The memory store keeps the kernel's history (issue 45)".
	History []Message
	// Fence is the token of the session's lease the writer holds (Lease,
	// RunOptions.Lease), or zero. A Leaser store refuses the step unless
	// it is the current token of a live lease (ErrLeaseLost); other
	// stores ignore it.
	Fence uint64
}

// Store persists sessions. The loop commits every step before it moves on,
// so a Store must make a step durable, all or nothing, before Commit returns.
//
// Commit creates the session when it does not exist. It returns an error
// wrapping ErrSeqConflict, and writes nothing, when the first message's Seq
// is not the stored LastSeq+1 or the messages are not consecutive: that is
// how a second writer is caught. Load returns an error wrapping
// ErrSessionNotFound for an unknown id. List returns every session's
// metadata, most recently updated first.
//
// Implementations must be safe for concurrent use; the conformance suite in
// kerneltest checks the contract.
// Why three methods around a Step: RATIONALE.md, "Store is three methods
// around a Step".
type Store interface {
	Load(ctx context.Context, id string) (*Session, error)
	Commit(ctx context.Context, id string, step Step) error
	List(ctx context.Context) ([]SessionMeta, error)
}

// Optional Store capabilities, all declared here, as database/sql/driver
// declares a driver's. A Store may implement any of them; a caller finds
// one by type assertion and, where the store lacks it, does what the list
// says. None is needed to run sessions.
//
//	SessionDeleter    Delete: `kernel sessions rm`, DELETE /v1/sessions/{id}; else "this store cannot delete sessions"
//	SessionExporter   Export: `kernel sessions export`, `kernel store copy`; else the session is loaded and written in the export format (package kernel/store/export)
//	SessionImporter   Import: `kernel sessions import`, `kernel store copy`; else "this store cannot import sessions"
//	SessionCollector  GC: `kernel sessions gc`; else "this store cannot collect sessions"
//	StoreChecker      Fsck: `kernel sessions fsck`; else "this store cannot check its sessions"
//	EventLog          AppendEvents, ReadEvents: the event streams of `kernel serve`; else kernel serve refuses the store
//	Leaser            AcquireLease, RenewLease, ReleaseLease: several processes writing one store (kernel serve replicas); else one process owns the store and Step.Fence means nothing
//	SpaceChecker      CheckSpace: a run refuses to start on a volume that cannot hold a step; else no check
//	SpaceReclaimer    Reclaim: `kernel sessions rm` and `gc` give the disk space back; else nothing to give back
//	StepEventCommitter CommitWithEvents: `kernel serve` stores a run's pending events in its step's transaction (one sync); else the events are appended (EventLog) after the step
//	SessionHeadLoader LoadHead: `kernel serve` checks a session's owner, status and pending approval without reading its messages; else Load
//
// The stores implement:
//
//	memory    SessionDeleter, EventLog, SessionHeadLoader
//	badger    SessionDeleter, SessionExporter, SessionImporter, SessionCollector, StoreChecker, EventLog, SpaceChecker, SpaceReclaimer, StepEventCommitter, SessionHeadLoader
//	postgres  SessionDeleter, SessionExporter, SessionImporter, SessionCollector, StoreChecker, EventLog, Leaser, StepEventCommitter, SessionHeadLoader
//
// A store several kernel serve replicas share also implements
// replica.Shared (kernel/replica): the runs, notices and queue of the
// replicas, which are the server's contracts rather than the kernel's.
// TestStoreCapabilities holds both lists to the declarations below and to
// the stores. Why interfaces here: RATIONALE.md, "Optional store
// capabilities are interfaces in kernel".

// SessionDeleter is a Store that can delete sessions.
type SessionDeleter interface {
	Delete(ctx context.Context, id string) error
}

// SessionExporter is a Store that can write a session out: JSON Lines, a
// header line with the metadata and pending approval, then one line per
// message (schemas/session-export.schema.json, the same for every store).
// On error the output is incomplete.
type SessionExporter interface {
	Export(ctx context.Context, id string, w io.Writer) error
}

// SessionImporter is a Store that can add a session a SessionExporter
// (of any store) wrote. Import checks all of it before storing anything
// and returns the session's id; a session with that id already stored is
// an error.
type SessionImporter interface {
	Import(ctx context.Context, r io.Reader) (id string, err error)
}

// SessionCollector is a Store that can delete every session not updated
// for olderThan (with whatever invisible remains the store keeps of
// interrupted writes). It returns the deleted sessions' ids, sorted.
type SessionCollector interface {
	GC(ctx context.Context, olderThan time.Duration) (removed []string, err error)
}

// StoreChecker is a Store that can check what it holds: every stored
// value of the sessions ids (all when ids is empty) read and verified,
// and a session that reads whole held to CheckHistory. With repair, a
// message that cannot be read is replaced for good by a placeholder so
// the session is whole again (and a store fixes what else of its own it
// can; FsckProblem.Repaired says which). The report is returned with
// the error when the check stopped part way.
type StoreChecker interface {
	Fsck(ctx context.Context, ids []string, repair bool) (*FsckReport, error)
}

// EventLog is an optional interface of a Store: it keeps each session's
// events, so that a front end (`kernel serve`) can replay them to a client
// that reconnects, from any process that opens the store. A Store without
// it has no event history; `kernel serve` refuses to start on it.
//
// AppendEvents stores events at the end of session id's log, all or
// nothing and durable when it returns, assigning consecutive Seq values
// after the last stored one (the events' own Seq is ignored); it returns
// the first. It fails with an error wrapping ErrSessionNotFound for a
// session the store does not hold. fence is the token of the session's
// lease the appender holds, as Step.Fence for a step, or zero: a Leaser
// store refuses the append, and appends nothing, unless the token is its
// live lease's (ErrLeaseLost), or without a token while another holder
// holds a live lease (ErrLeaseHeld), so a process that lost the session
// appends no event more; other stores ignore it. ReadEvents returns, in
// order, up to limit (at least 1; the store may cap it) events of session
// id whose Seq is greater than after; an unknown session has none.
// Deleting a session (SessionDeleter) deletes its events.
//
// Implementations must be safe for concurrent use; concurrent appends to
// one session are serialised. kerneltest.TestEventLog checks the contract.
// Why: RATIONALE.md, "Events are stored per session, with ids".
type EventLog interface {
	AppendEvents(ctx context.Context, id string, fence uint64, events []StoredEvent) (first uint64, err error)
	ReadEvents(ctx context.Context, id string, after uint64, limit int) ([]StoredEvent, error)
}

// StepEventCommitter is an EventLog that can store a step and events of
// its session in one transaction: CommitWithEvents is Commit (same
// contract, same errors) and AppendEvents of events with step.Fence as
// the fence, all or nothing, with one durable write instead of two. It
// returns the Seq of the first event (0 when events is empty). When it
// fails, neither the step nor the events are stored, and the caller may
// append the events on their own. Concurrent appends to the session are
// serialised with it, as with AppendEvents.
//
// kernel serve uses it to make a run's events durable with the step they
// precede (RunOptions.CommitStep). Why: RATIONALE.md, "A run's events
// ride its step's commit".
type StepEventCommitter interface {
	CommitWithEvents(ctx context.Context, id string, step Step, events []StoredEvent) (first uint64, err error)
}

// SessionHeadLoader is a Store that can load a session without its
// messages: LoadHead is Load (the same errors, a damaged metadata value
// the same *CorruptError) with Messages left nil, at a cost that does not
// grow with the session's length. `kernel serve` uses it where a request
// reads only the metadata and the pending approval (a stream's start,
// a run's 202).
type SessionHeadLoader interface {
	LoadHead(ctx context.Context, id string) (*Session, error)
}

// Leaser is an optional interface of a Store that several processes write
// at once (replicas of `kernel serve` on one PostgreSQL database): each
// session has at most one writer, the holder of its lease, and every step
// the holder writes carries the lease's token (Step.Fence). The store
// refuses a fenced step whose token is not the session's current one, or
// whose lease has expired, with ErrLeaseLost; and an unfenced step to a
// session whose lease is live with ErrLeaseHeld. A process that paused
// past its lease (and whose session another holder took over) therefore
// cannot write a step late. Stores that one process owns (badger, memory)
// do not implement it: Step.Fence means nothing to them.
//
// AcquireLease grants session id's lease to holder for ttl, with a new,
// larger token, when no other holder has a live lease (else an error
// wrapping ErrLeaseHeld, a *LeaseHeldError); the session must exist
// (ErrSessionNotFound). RenewLease extends a lease still held for ttl
// from now (else ErrLeaseLost). ReleaseLease gives it up; releasing a
// lease no longer held is not an error. A lease ends when it expires, so
// a holder that dies loses its sessions after ttl.
//
// Implementations must be safe for concurrent use; kerneltest.TestLeaser
// checks the contract. Why a lease row with a token: RATIONALE.md, "One
// writer per session: a lease row with a fencing token".
type Leaser interface {
	AcquireLease(ctx context.Context, id, holder string, ttl time.Duration) (Lease, error)
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	ReleaseLease(ctx context.Context, l Lease) error
}

// SpaceChecker is a Store on a volume that can fill up (badger): CheckSpace
// fails when the volume cannot take a write of step bytes on top of the
// store's reserve, so a run is refused before it announces its session
// rather than failing mid-run.
type SpaceChecker interface {
	CheckSpace(step int64) error
}

// SpaceReclaimer is a Store whose deleted sessions keep their disk space
// until it is reclaimed (badger: compaction and value-log collection).
// Reclaim gives it back and says how much.
type SpaceReclaimer interface {
	Reclaim(ctx context.Context) (ReclaimResult, error)
}

// ReclaimResult is what a SpaceReclaimer's Reclaim did.
type ReclaimResult struct {
	// Where names the store (its directory).
	Where         string
	Before, After int64 // bytes allocated on disk
	FilesBefore   int
	FilesAfter    int
	Rewritten     int // files rewritten
}
