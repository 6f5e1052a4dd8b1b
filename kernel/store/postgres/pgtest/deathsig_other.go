//go:build !linux

package pgtest

import "syscall"

// dieWithParent does nothing off Linux (no Pdeathsig): a test binary
// killed with -9 leaves its PostgreSQL running until someone stops it.
func dieWithParent(*syscall.SysProcAttr) {}
