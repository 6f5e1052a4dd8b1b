//go:build !linux

package proc

// waitExited returns at once: Wait reaps, and the group is killed right
// after (false: the pid was not kept reserved).
func waitExited(int) bool { return false }

// Spawner starts processes on the calling goroutine's thread: without a
// parent-death signal the thread does not matter.
type Spawner struct{}

// NewSpawner returns a Spawner.
func NewSpawner() *Spawner { return &Spawner{} }

// Do runs start.
func (*Spawner) Do(start func() error) error { return start() }

// Stop does nothing.
func (*Spawner) Stop() {}
