//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// seccompArch is the audit architecture of this build's system calls;
// seccompX32 marks the x32 ABI's calls, which share it.
const (
	seccompArch = unix.AUDIT_ARCH_X86_64
	seccompX32  = 0x40000000
)
