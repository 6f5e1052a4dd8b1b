package builtin

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// waitAndKillGroup waits until p exits or ctx is done, kills p's whole
// process group, then reaps p. The group is killed before p is reaped: an
// unreaped leader keeps its pid, and so the group id, from being reused, so
// the kill can never reach an unrelated process group.
func waitAndKillGroup(ctx context.Context, p *os.Process) (*os.ProcessState, error) {
	exited := make(chan error, 1)
	go func() { exited <- waitExited(p.Pid) }()
	select {
	case err := <-exited:
		if err != nil {
			// waitid failed without waiting: fall back to reaping first.
			return reapThenKill(ctx, p)
		}
	case <-ctx.Done():
		killGroup(p.Pid)
		<-exited
	}
	killGroup(p.Pid)
	return p.Wait()
}

// waitExited blocks until the process pid has exited, without reaping it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
