//go:build !unix

package proc

import (
	"errors"
	"os"
)

// KillGroup kills the process pid: without process groups, only it. A
// process already gone is not an error.
func KillGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
