//go:build unix

package subprocess

import (
	"crypto/sha256"
	"os"

	"golang.org/x/sys/unix"
)

// hashCopy returns the sha256 of f's whole content, read through a
// read-only mapping (populated at once: one call instead of a page fault
// per page) rather than copied into a buffer: the plugin binary is tens
// of megabytes, and its hash is most of a Go plugin's verification
// (RATIONALE.md, "Go plugin start: the wall is CPU (issue 45)"). f must be
// a file nobody else writes (the host's private copy). An empty file or
// one the system will not map is read instead.
func hashCopy(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if n := fi.Size(); n > 0 && int64(int(n)) == n {
		m, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED|mapPopulate)
		if err == nil {
			sum := sha256.Sum256(m)
			if err := unix.Munmap(m); err != nil {
				return nil, err
			}
			return sum[:], nil
		}
	}
	return hashRead(f)
}
