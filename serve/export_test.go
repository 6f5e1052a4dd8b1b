package serve

import (
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// SetBeforePublish sets the hook called between a step's commit with
// events and their publication (nil removes it).
func SetBeforePublish(f func(id string, first uint64, events []kernel.StoredEvent)) {
	if f == nil {
		beforePublish.Store(nil)
		return
	}
	beforePublish.Store(&f)
}

// SetLinger sets how long an attached run's events wait for its next
// step in the servers made from now on (0: not at all); restore undoes it.
func SetLinger(d time.Duration) (restore func()) {
	old := lingerOverride.Swap(&d)
	return func() { lingerOverride.Store(old) }
}
