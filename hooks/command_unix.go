//go:build unix

package hooks

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel makes the timeout kill the hook's whole process group
// (the sandbox's launcher leads it, so its PID namespace dies too).
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
