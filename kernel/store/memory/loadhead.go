package memory

import (
	"context"

	"github.com/agentkernel/agentkernel/kernel"
)

// LoadHead is Load without the messages (kernel.SessionHeadLoader): the
// metadata (its labels copied) and a copy of the pending approval, with
// Messages nil. `kernel serve` checks a run's owner and pending approval
// with it.
func (s *Store) LoadHead(_ context.Context, id string) (*kernel.Session, error) {
	return s.load(id, false)
}
