//go:build unix

package privfile

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// The open flags of private files: never through a symbolic link, never
// blocked by a FIFO, never inherited by a child.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonblock = syscall.O_NONBLOCK
	oCloexec  = syscall.O_CLOEXEC
)

// owner is the uid that owns fi, or -1 where the system has none.
func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// links is the number of hard links to fi (1 where unknown).
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// isLoop reports whether an open failed on a symbolic link (O_NOFOLLOW).
func isLoop(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK)
}

// Lock takes an exclusive flock on path (created 0600, never through a
// symbolic link) and returns its release. It blocks while another process
// holds it.
func Lock(path string) (unlock func(), err error) {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		if isLoop(err) {
			return nil, linkError(path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		syscall.Close(fd)
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return func() { syscall.Close(fd) }, nil
}
