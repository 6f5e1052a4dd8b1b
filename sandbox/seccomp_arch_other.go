//go:build linux && !amd64 && !arm64

package sandbox

// No seccomp filter is built for this architecture: LayerSeccomp is
// missing here (the system call numbers and the audit architecture are
// per architecture, and only amd64 and arm64 are tested).
const (
	seccompArch = 0
	seccompX32  = 0
)
