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

// lockHolder is who holds the flock Badger takes on a store directory:
// nobody, readers (shared locks) or a writer (an exclusive lock).
type lockHolder int

const (
	heldByNobody lockHolder = iota
	heldByReaders
	heldByWriter
)

// probeLock finds out who holds dir's flock, without keeping any lock.
// Badger's own lock error is a plain string, so Open asks the kernel.
func probeLock(dir string) lockHolder {
	f, err := os.Open(dir)
	if err != nil {
		return heldByNobody
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		return heldByNobody
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		return heldByNobody
	}
	if err := syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		return heldByReaders
	}
	return heldByWriter
}

// lockedError is the ErrLocked error for dir held by h.
func lockedError(dir string, h lockHolder) error {
	holder := "another kernel"
	if h == heldByReaders {
		holder = "another kernel, reading it,"
	} else if b, err := os.ReadFile(filepath.Join(dir, "LOCK")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			holder = fmt.Sprintf("another kernel (pid %d)", pid)
		}
	}
	return fmt.Errorf("open session store %s: %w: %s holds it; wait for it to finish or use another store directory", dir, ErrLocked, holder)
}
