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

// removeEmptyLogs removes the empty (0-byte) memtable and value logs of
// dir, and returns their names, if no process holds the store. Badger
// creates a log file and then sizes it; a process killed between the two
// leaves an empty file that no entry can refer to (not even the file's
// header was written), and Badger then refuses to open the store at all
// ("Open existing file: … Create a new file"). Open calls it first.
func removeEmptyLogs(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, nil // held: not ours to repair
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".vlog") && !strings.HasSuffix(e.Name(), ".mem") {
			continue
		}
		if fi, err := e.Info(); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return removed, err
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}
