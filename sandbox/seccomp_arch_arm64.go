//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// seccompArch is the audit architecture of this build's system calls;
// arm64 has no second ABI sharing it.
const (
	seccompArch = unix.AUDIT_ARCH_AARCH64
	seccompX32  = 0
)
