package kernel

import (
	"context"
	"fmt"
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
// None is needed to run sessions. The badger and postgres stores
// implement them all; the memory store only SessionDeleter. Why interfaces here: RATIONALE.md,
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
// value of the sessions ids (all when ids is empty) read and verified,
// and a session that reads whole held to CheckHistory. With repair, a
// message that cannot be read is replaced for good by a placeholder so
// the session is whole again (and a store fixes what else of its own it
// can; FsckProblem.Repaired says which). The report is returned with
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
	// Problems are what is wrong with a session whose values all read:
	// a history the kernel would not have written (CheckHistory), rows
	// a store keeps that disagree with each other.
	Problems []FsckProblem
}

// FsckProblem is one inconsistency a StoreChecker found in a session.
type FsckProblem struct {
	Seq  uint64 // the message it is about, or 0 for the session
	Text string
	// Repaired is set when the checker fixed it (repair mode).
	Repaired bool
}

// OK reports whether nothing in the session is damaged.
func (f *FsckSession) OK() bool {
	return len(f.Damaged) == 0 && f.Meta == nil && f.Pending == nil && len(f.Problems) == 0
}

// Unrepaired reports whether something found in the session is still
// wrong: damage no repair stored placeholders for, metadata or a pending
// approval that does not read, a problem the checker could not fix.
func (f *FsckSession) Unrepaired() bool {
	if f.Meta != nil || f.Pending != nil || len(f.Damaged) > 0 && !f.Repaired {
		return true
	}
	for _, p := range f.Problems {
		if !p.Repaired {
			return true
		}
	}
	return false
}

// CheckHistory returns what in a session's messages (all readable, in
// seq order) breaks the pairing of tool calls and results that every
// history the kernel writes keeps: each tool result answers a call of the
// assistant message before it, once; every call of an assistant message
// has its result before the next assistant message (the last assistant
// message's calls may still be open: loading the session answers them as
// interrupted); a pending approval is for one of those open calls. A
// model API rejects a history that breaks it. Stores' fsck use it.
func CheckHistory(msgs []Message, pending *Approval) []FsckProblem {
	var out []FsckProblem
	var open, answered map[string]bool
	var turn *Message // the last assistant message
	unanswered := func() {
		if turn == nil {
			return
		}
		for _, c := range turn.ToolCalls {
			if open[c.ID] {
				out = append(out, FsckProblem{Seq: turn.Seq, Text: fmt.Sprintf("call %s (%s) has no result, and a later assistant message follows it", c.ID, c.Name)})
			}
		}
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case RoleAssistant:
			unanswered()
			turn, open, answered = m, map[string]bool{}, map[string]bool{}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case RoleTool:
			switch {
			case open[m.ToolCallID]:
				delete(open, m.ToolCallID)
				answered[m.ToolCallID] = true
			case answered[m.ToolCallID]:
				out = append(out, FsckProblem{Seq: m.Seq, Text: fmt.Sprintf("a second result for call %s", m.ToolCallID)})
			default:
				out = append(out, FsckProblem{Seq: m.Seq, Text: fmt.Sprintf("a result for call %q, which the assistant message before it did not make", m.ToolCallID)})
			}
		}
	}
	if pending != nil && !open[pending.Call.ID] {
		out = append(out, FsckProblem{Text: fmt.Sprintf("the pending approval is for call %q, which is not an open call of the last assistant message", pending.Call.ID)})
	}
	return out
}
