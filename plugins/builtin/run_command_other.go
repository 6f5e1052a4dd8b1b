//go:build !unix

package builtin

import (
	"os"
	"syscall"
)

// oNonblock is not needed where there are no FIFOs to open.
const oNonblock = 0

// groupAttr is nil: without process groups only the program itself is
// killed, not the processes it started.
func groupAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the process pid: without process groups, only it.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
