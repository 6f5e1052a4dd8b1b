package kernel

import "context"

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

// SessionDeleter is a Store that can delete sessions. Stores without it
// cannot remove sessions; the CLI says so.
type SessionDeleter interface {
	Delete(ctx context.Context, id string) error
}
