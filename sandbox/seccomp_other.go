//go:build linux && !amd64 && !arm64

package sandbox

import "errors"

// installSeccomp has no filter for this architecture; the layer is
// reported missing (seccomp_arch_other.go).
func installSeccomp() error {
	return errors.New("seccomp: no filter is built for this architecture (amd64 and arm64 only)")
}
