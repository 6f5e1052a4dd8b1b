//go:build !unix

package builtin

import "os"

// oNonblock is not needed where there are no FIFOs to open.
const oNonblock = 0

// killGroup kills the process pid: without process groups, only it.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
