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

// Optional Store capabilities. A Store may implement any of the interfaces
// below; a caller finds one by type assertion and, where the store lacks
// it, says that this store cannot do that (the CLI's `kernel sessions rm`,
// `export`, `import`, `gc` and `fsck` fail with "this store cannot ...").
// None is needed to run sessions. The badger store implements them all;
// the memory store only SessionDeleter. Why interfaces here: RATIONALE.md,
// "Optional store capabilities are interfaces in kernel".

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
// value of the sessions ids (all when ids is empty) read and verified.
// With repair, a message that cannot be read is replaced for good by a
// placeholder so the session is whole again. The report is returned with
// the error when the check stopped part way.
type StoreChecker interface {
	Fsck(ctx context.Context, ids []string, repair bool) (*FsckReport, error)
}

// FsckReport is what a StoreChecker found.
type FsckReport struct {
	Sessions []FsckSession
	// Quarantined lists copies of damaged files the store kept aside.
	Quarantined []string
}

// Damaged counts the sessions with damage.
func (r *FsckReport) Damaged() int {
	n := 0
	for i := range r.Sessions {
		if !r.Sessions[i].OK() {
			n++
		}
	}
	return n
}

// FsckSession is what a StoreChecker found in one session.
type FsckSession struct {
	ID       string
	Messages int // message values read
	// Damaged maps the sequence number of each message that cannot be
	// read to the reason (a checksum mismatch, a value that does not
	// decode, a missing message).
	Damaged map[uint64]string
	// Meta and Pending are the errors reading those parts, if any.
	Meta    error
	Pending error
	// Repaired is set when the checker stored placeholders for the
	// damaged messages (repair mode).
	Repaired bool
}

// OK reports whether nothing in the session is damaged.
func (f *FsckSession) OK() bool { return len(f.Damaged) == 0 && f.Meta == nil && f.Pending == nil }
