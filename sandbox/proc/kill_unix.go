//go:build unix

package proc

import (
	"errors"
	"syscall"
)

// KillGroup sends SIGKILL to the process group led by pid: the sandbox's
// launcher and so every process of the sandbox. When there is no such
// group, pid alone is killed; a process already gone is not an error.
func KillGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err == nil {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
