//go:build unix && !linux

package subprocess

// waitExited returns at once: cmd.Wait reaps, and the group is killed
// right after.
func waitExited(int) {}

// spawner starts processes on the calling goroutine's thread: without a
// parent-death signal the thread does not matter.
type spawner struct{}

func newSpawner() *spawner                   { return &spawner{} }
func (*spawner) do(start func() error) error { return start() }
func (*spawner) stop()                       {}
