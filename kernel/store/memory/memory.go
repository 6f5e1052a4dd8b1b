// Package memory is an in-memory kernel.Store: fast, concurrent, and gone
// when the process exits. It is the store of tests, benchmarks and the
// offline demo.
package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/agentkernel/agentkernel/kernel"
)

// Store keeps sessions in memory. It is safe for concurrent use.
type Store struct {
	mu       sync.RWMutex
	sessions map[string]*session
}

type session struct {
	meta    kernel.SessionMeta
	msgs    []kernel.Message
	pending *kernel.Approval
	events  []kernel.StoredEvent
}

// New returns an empty store.
func New() *Store { return &Store{sessions: map[string]*session{}} }

// Load returns the session. Its Messages slice has no spare capacity, so a
// caller appending to it never writes into the store.
func (s *Store) Load(_ context.Context, id string) (*kernel.Session, error) {
	return s.load(id, true)
}

// load copies session id out: its metadata (labels cloned), a copy of the
// pending approval and, withMessages, the messages (clipped, so that an
// append by the caller never writes into the store's array).
func (s *Store) load(id string, withMessages bool) (*kernel.Session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	se, ok := s.sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	out := &kernel.Session{Meta: se.meta}
	if withMessages {
		out.Messages = se.msgs[:len(se.msgs):len(se.msgs)]
	}
	out.Meta.Labels = maps.Clone(se.meta.Labels)
	if se.pending != nil {
		p := *se.pending
		out.Pending = &p
	}
	return out, nil
}

// Commit stores step atomically (see kernel.Store).
func (s *Store) Commit(_ context.Context, id string, step kernel.Step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[id]
	var last uint64
	if se != nil {
		last = se.meta.LastSeq
	}
	for i, m := range step.Messages {
		if want := last + uint64(i) + 1; m.Seq != want {
			return fmt.Errorf("session %q: message %d has seq %d, want %d: %w", id, i, m.Seq, want, kernel.ErrSeqConflict)
		}
	}
	if se == nil {
		se = &session{}
		s.sessions[id] = se
	}
	if h := step.History; adoptable(h, step.Messages, last) {
		se.msgs = h[:len(h):len(h)]
	} else {
		se.msgs = appendRoom(se.msgs, step.Messages)
	}
	meta := step.Meta
	meta.ID = id
	meta.LastSeq = last + uint64(len(step.Messages))
	meta.Labels = maps.Clone(meta.Labels)
	se.meta = meta
	if step.ClearPending {
		se.pending = nil
	}
	if step.Pending != nil {
		p := *step.Pending
		se.pending = &p
	}
	return nil
}

// adoptable reports whether the store may keep h, a step's History, as
// the session's messages instead of copying msgs, the step's messages,
// after its last stored ones: h holds last messages then msgs itself (the
// same array, as the kernel builds it), and its writer never writes them
// again (kernel.Step.History). The store keeps h clipped, so that neither
// it nor a caller appending to a Load's messages writes into the writer's
// array. A step whose History is missing or built otherwise is copied.
// Why: RATIONALE.md, "The memory store keeps the kernel's history (issue 45)".
func adoptable(h, msgs []kernel.Message, last uint64) bool {
	k := len(msgs)
	if k == 0 || uint64(len(h)) != last+uint64(k) || &h[len(h)-k] != &msgs[0] {
		return false
	}
	return h[0].Seq == 1
}

// minRoom is the capacity a session's history starts with: a prompt and a
// few turns with their tool results fit without growing.
const minRoom = 8

// appendRoom appends msgs to h, growing h by doubling (from minRoom) when
// it is full, so that the commits of a run append in place instead of
// reallocating the history at every step (append's own growth starts from
// one message). Earlier Loads keep reading the old array, which is never
// written again.
func appendRoom(h, msgs []kernel.Message) []kernel.Message {
	if n := len(h) + len(msgs); n > cap(h) {
		grown := make([]kernel.Message, len(h), max(n, 2*cap(h), minRoom))
		copy(grown, h)
		h = grown
	}
	return append(h, msgs...)
}

// List returns all sessions' metadata, most recently updated first.
func (s *Store) List(_ context.Context) ([]kernel.SessionMeta, error) {
	s.mu.RLock()
	out := make([]kernel.SessionMeta, 0, len(s.sessions))
	for _, se := range s.sessions {
		out = append(out, se.meta)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b kernel.SessionMeta) int { return b.Updated.Compare(a.Updated) })
	return out, nil
}

// Delete removes a session; deleting an unknown session is an error
// wrapping kernel.ErrSessionNotFound.
func (s *Store) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[id]; !ok {
		return fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	delete(s.sessions, id)
	return nil
}

// AppendEvents adds events to the session's log (kernel.EventLog). The
// fence is ignored: one process owns the store.
func (s *Store) AppendEvents(_ context.Context, id string, _ uint64, events []kernel.StoredEvent) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.sessions[id]
	if !ok {
		return 0, fmt.Errorf("append events: session %q: %w", id, kernel.ErrSessionNotFound)
	}
	first := uint64(len(se.events)) + 1
	for i, e := range events {
		e.Seq = first + uint64(i)
		e.Data = slices.Clone(e.Data)
		se.events = append(se.events, e)
	}
	return first, nil
}

// ReadEvents returns up to limit events after the given Seq
// (kernel.EventLog).
func (s *Store) ReadEvents(_ context.Context, id string, after uint64, limit int) ([]kernel.StoredEvent, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	se, ok := s.sessions[id]
	if !ok || after >= uint64(len(se.events)) {
		return nil, nil
	}
	evs := se.events[after:]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	return slices.Clone(evs), nil
}

var (
	_ kernel.Store          = (*Store)(nil)
	_ kernel.SessionDeleter = (*Store)(nil)
	_ kernel.EventLog       = (*Store)(nil)
)
