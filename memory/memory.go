package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Chunk is one indexed piece of a stored message: the scrubbed text of a
// user prompt, an assistant answer or a tool result exactly as the session
// store holds it, cut to at most MaxChunkRunes runes (Split).
//
// A chunk is identified by ID, which ChunkID derives from (SessionID, Seq,
// Part): indexing the same message twice writes the same chunks.
type Chunk struct {
	// ID is ChunkID(SessionID, Seq, Part).
	ID string `json:"id"`
	// SessionID is the session the message belongs to.
	SessionID string `json:"session_id"`
	// Owner is the session's owner: the API key owner in kernel serve
	// (label serve.owner), empty for a session run from the command line.
	// Every scope filters on it (Scope).
	Owner string `json:"owner,omitempty"`
	// Workspace is the session's workspace directory (SessionContext).
	Workspace string `json:"workspace,omitempty"`
	// Seq is the message's Seq in its session; Part numbers the chunks of
	// one message from 0.
	Seq  uint64 `json:"seq"`
	Part int    `json:"part"`
	// Role is "user", "assistant" or "tool"; Tool names the tool a tool
	// result answers.
	Role string    `json:"role"`
	Tool string    `json:"tool,omitempty"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
	// Vector is the chunk's embedding, or nil until one is computed. An
	// index keeps vectors of one dimension (Status.Dimensions).
	Vector []float32 `json:"vector,omitempty"`
}

// ChunkID is the ID of part part of message seq of session sessionID.
func ChunkID(sessionID string, seq uint64, part int) string {
	return fmt.Sprintf("%s/%d/%d", sessionID, seq, part)
}

// Validate reports what is wrong with c, naming the field: an ID that is
// not ChunkID(SessionID, Seq, Part), no session, empty text, or a vector
// holding NaN or infinity. Every Index refuses such a chunk.
func (c *Chunk) Validate() error {
	switch {
	case c.SessionID == "":
		return fmt.Errorf("chunk %q: session_id is empty", c.ID)
	case c.ID != ChunkID(c.SessionID, c.Seq, c.Part):
		return fmt.Errorf("chunk %q: id is not %q (session_id/seq/part)", c.ID, ChunkID(c.SessionID, c.Seq, c.Part))
	case c.Text == "":
		return fmt.Errorf("chunk %q: text is empty", c.ID)
	}
	for i, x := range c.Vector {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("chunk %q: vector[%d] is %v: %w", c.ID, i, x, ErrBadVector)
		}
	}
	return nil
}

// ScopeKind says which chunks a search sees.
type ScopeKind string

const (
	// ScopeSession: the chunks of one session (Scope.SessionID). The default.
	ScopeSession ScopeKind = "session"
	// ScopeOwner: the chunks of every session of Scope.Owner.
	ScopeOwner ScopeKind = "owner"
	// ScopeWorkspace: the chunks of every session of Scope.Owner run in
	// Scope.Workspace.
	ScopeWorkspace ScopeKind = "workspace"
)

// Scope selects the chunks a search may return. Owner is a filter in every
// kind, matched exactly (an empty Owner matches only chunks with an empty
// Owner): a search never returns a chunk of another owner, whatever the
// kind. Session additionally needs Chunk.SessionID == SessionID, workspace
// Chunk.Workspace == Workspace.
type Scope struct {
	Kind      ScopeKind `json:"kind"`
	SessionID string    `json:"session_id,omitempty"`
	Owner     string    `json:"owner,omitempty"`
	Workspace string    `json:"workspace,omitempty"`
}

// Validate reports a scope no search can serve (ErrScope): an unknown kind,
// a session scope without SessionID, a workspace scope without Workspace.
func (s Scope) Validate() error {
	switch s.Kind {
	case ScopeSession:
		if s.SessionID == "" {
			return fmt.Errorf("session scope without a session id: %w", ErrScope)
		}
	case ScopeOwner:
	case ScopeWorkspace:
		if s.Workspace == "" {
			return fmt.Errorf("workspace scope without a workspace: %w", ErrScope)
		}
	default:
		return fmt.Errorf("scope kind %q (want session, owner or workspace): %w", s.Kind, ErrScope)
	}
	return nil
}

// Match reports whether c is inside s. Indexes filter in their own query
// language; Match is the reference they are tested against.
func (s Scope) Match(c *Chunk) bool {
	if c.Owner != s.Owner {
		return false
	}
	switch s.Kind {
	case ScopeSession:
		return c.SessionID == s.SessionID
	case ScopeOwner:
		return true
	case ScopeWorkspace:
		return c.Workspace == s.Workspace
	}
	return false
}

// Source says which search found a hit.
type Source string

const (
	SourceText   Source = "text"   // full-text search (BM25 or the store's own ranking)
	SourceVector Source = "vector" // nearest neighbours by cosine similarity
	SourceHybrid Source = "hybrid" // fused from both (Fuse)
)

// Hit is one search result. Hits come best first: Rank 1 is the best;
// Score is higher for better hits and comparable only within one result
// list. Hit.Chunk.Vector is nil (searches do not return vectors).
type Hit struct {
	Chunk  Chunk   `json:"chunk"`
	Score  float64 `json:"score"`
	Rank   int     `json:"rank"`
	Source Source  `json:"source"`
}

// Status describes an index, for `kernel memory status`.
type Status struct {
	// Backend names the implementation ("bleve", "postgres", a plugin's name).
	Backend string `json:"backend"`
	// Chunks counts indexed chunks; Vectors those with a vector;
	// Sessions the sessions with at least one chunk or a mark.
	Chunks   int64 `json:"chunks"`
	Vectors  int64 `json:"vectors"`
	Sessions int64 `json:"sessions"`
	// Dimensions is the dimension of the stored vectors, 0 before the first.
	Dimensions int `json:"dimensions"`
	// Bytes is the index's size on disk (or in the database), -1 if unknown.
	Bytes int64 `json:"bytes"`
	// Detail is anything else worth a line (where it lives, a rebuild done
	// on open), or empty.
	Detail string `json:"detail,omitempty"`
}

// Index stores chunks and searches them. The indexer (write-through, off
// the loop) is its only writer; retrieval, the memory_search tool, the CLI
// and kernel serve read it. Implementations must be safe for concurrent use
// and pass memorytest.RunIndexTests.
//
//   - Add writes the chunks and the marks as one unit: after a crash either
//     all of them are there or none (the indexer then indexes them again).
//     It is idempotent by Chunk.ID: a chunk added again replaces the stored
//     one (that is how a vector computed later is attached). It validates
//     every chunk first (Chunk.Validate, and a vector whose dimension is not
//     the index's: ErrDimension) and writes nothing if one is invalid.
//     When Add returns nil the batch is durable.
//   - SearchText ranks the chunks in scope by the words of q (BM25 or
//     better, English stemming; any script, CJK and emoji included: a query
//     never fails for its script), best first, at most k. An empty query or
//     k <= 0 returns no hits and no error.
//   - SearchVector ranks the chunks in scope that have a vector by cosine
//     similarity to v, best first, at most k; v of another dimension is
//     ErrDimension; an index without vectors, or a zero v (no direction),
//     returns no hits.
//   - Mark returns the Seq up to which session id is indexed (the last
//     Batch.Marks value written for it), 0 if none.
//   - Pending returns up to limit chunks without a vector, oldest first,
//     for the embedder's backlog.
//   - DeleteSession removes the session's chunks and mark; deleting an
//     unknown session is not an error.
//   - Status counts what the index holds.
//   - Close releases the index; it is durable before Close returns.
//
// Invalid scopes are refused with ErrScope (Scope.Validate).
type Index interface {
	Add(ctx context.Context, b Batch) error
	SearchText(ctx context.Context, s Scope, q string, k int) ([]Hit, error)
	SearchVector(ctx context.Context, s Scope, v []float32, k int) ([]Hit, error)
	Mark(ctx context.Context, sessionID string) (uint64, error)
	Pending(ctx context.Context, limit int) ([]Chunk, error)
	DeleteSession(ctx context.Context, sessionID string) error
	Status(ctx context.Context) (Status, error)
	Close() error
}

// Batch is one Index.Add: chunks and, per session, the Seq the session is
// indexed up to once the chunks are in.
type Batch struct {
	Chunks []Chunk
	Marks  map[string]uint64
}

var (
	// ErrScope: a scope no search can serve (Scope.Validate).
	ErrScope = errors.New("memory: invalid scope")
	// ErrDimension: a vector whose dimension is not the index's.
	ErrDimension = errors.New("memory: vector dimension mismatch")
	// ErrBadVector: a vector holding NaN or infinity.
	ErrBadVector = errors.New("memory: vector holds NaN or infinity")
	// ErrClosed: the index was closed.
	ErrClosed = errors.New("memory: index closed")
)
