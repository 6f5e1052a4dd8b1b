//go:build unix

package builtin

import (
	"errors"
	"syscall"
)

// oNonblock keeps opening a FIFO from blocking; it changes nothing for
// regular files.
const oNonblock = syscall.O_NONBLOCK

// killGroup sends SIGKILL to every process of the group led by pid.
func killGroup(pid int) {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		// Nothing else can be done; the leader is killed directly below.
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
