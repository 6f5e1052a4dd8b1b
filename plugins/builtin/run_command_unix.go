//go:build unix

package builtin

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// oNonblock keeps opening a FIFO from blocking; it changes nothing for
// regular files.
const oNonblock = syscall.O_NONBLOCK

// groupAttr puts the child in a new process group whose id is its pid.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGKILL to every process of the group led by pid.
func killGroup(pid int) {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		// Nothing else can be done; the leader is killed directly below.
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// reapThenKill waits for p (reaping it) or ctx, then kills p's process
// group. After p has been reaped its pid, and so the group id, could in
// principle be reused before the kill; Linux avoids that window (see
// waitAndKillGroup), other systems use this.
func reapThenKill(ctx context.Context, p *os.Process) (*os.ProcessState, error) {
	type waited struct {
		st  *os.ProcessState
		err error
	}
	ch := make(chan waited, 1)
	go func() {
		st, err := p.Wait()
		ch <- waited{st, err}
	}()
	var w waited
	select {
	case w = <-ch:
		killGroup(p.Pid)
	case <-ctx.Done():
		killGroup(p.Pid)
		w = <-ch
	}
	return w.st, w.err
}
