//go:build !linux

package sdk

import "os/exec"

// setParentDeathSignal does nothing: only Linux has parent-death signals.
func setParentDeathSignal(*exec.Cmd) {}
