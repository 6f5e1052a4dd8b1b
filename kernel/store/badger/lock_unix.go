//go:build unix

package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockedError returns an error wrapping ErrLocked when another open file
// holds the flock Badger takes on dir (exclusive for a writer, shared for
// readers), or nil. Badger's own error is a string, so Open asks the
// kernel directly after Badger failed.
func lockedError(dir string, readOnly bool) error {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	fd := int(f.Fd())
	how := syscall.LOCK_EX
	if readOnly {
		how = syscall.LOCK_SH
	}
	err = syscall.Flock(fd, how|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		return nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return nil
	}
	holder := "another kernel"
	if !readOnly && syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB) == nil {
		// A shared lock is free: the holders are readers.
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		holder = "another kernel, reading it,"
	} else if b, err := os.ReadFile(filepath.Join(dir, "LOCK")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			holder = fmt.Sprintf("another kernel (pid %d)", pid)
		}
	}
	return fmt.Errorf("open session store %s: %w: %s holds it; wait for it to finish or use another store directory", dir, ErrLocked, holder)
}
