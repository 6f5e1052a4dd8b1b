package memory

import (
	"context"
	"fmt"
	"maps"

	"github.com/agentkernel/agentkernel/kernel"
)

// LoadHead is Load without the messages (kernel.SessionHeadLoader): the
// metadata (its labels copied) and a copy of the pending approval, with
// Messages nil. `kernel serve` checks a run's owner and pending approval
// with it.
func (s *Store) LoadHead(_ context.Context, id string) (*kernel.Session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	se, ok := s.sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %q: %w", id, kernel.ErrSessionNotFound)
	}
	out := &kernel.Session{Meta: se.meta}
	out.Meta.Labels = maps.Clone(se.meta.Labels)
	if se.pending != nil {
		p := *se.pending
		out.Pending = &p
	}
	return out, nil
}
