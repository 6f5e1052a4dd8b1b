//go:build !unix

package hooks

import "os/exec"

// ownProcessGroup is a no-op without Unix process groups: the timeout
// kills the hook process only.
func killGroupOnCancel(*exec.Cmd) {}
