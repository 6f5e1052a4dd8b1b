//go:build unix

package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// lockedError is the ErrLocked error for dir held by h. It names the
// holders (pid and command line, from /proc/locks and /proc/PID/cmdline)
// when the system says who they are.
func lockedError(dir string, h lockHolder) error {
	who := describeHolders(dir, h)
	return fmt.Errorf("open session store %s: %w: %s holds it; wait for it to finish or use another store directory", dir, ErrLocked, who)
}

// describeHolders names the processes holding dir's flock: "another
// kernel (pid 123, \"kernel run …\")", or, when they cannot be found, the
// pid Badger wrote in the LOCK file.
func describeHolders(dir string, h lockHolder) string {
	pids := flockHolders(dir)
	if len(pids) == 0 && h == heldByWriter {
		if b, err := os.ReadFile(filepath.Join(dir, "LOCK")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				pids = []int{pid}
			}
		}
	}
	what := "another kernel"
	if h == heldByReaders {
		what = "another kernel, reading it,"
	}
	if len(pids) == 0 {
		return what
	}
	var parts []string
	for _, pid := range pids {
		if c := commandOf(pid); c != "" {
			parts = append(parts, fmt.Sprintf("pid %d, %q", pid, c))
		} else {
			parts = append(parts, fmt.Sprintf("pid %d", pid))
		}
	}
	if h == heldByReaders {
		return fmt.Sprintf("another kernel, reading it (%s),", strings.Join(parts, "; "))
	}
	return fmt.Sprintf("%s (%s)", what, strings.Join(parts, "; "))
}

// heldBySelf says whether this process is the only one /proc/locks lists
// as holding dir's flock (it names the process that took the lock, also
// while a forked child holds the lock's descriptor).
func heldBySelf(dir string) bool {
	pids := flockHolders(dir)
	return len(pids) == 1 && pids[0] == os.Getpid()
}

// flockHolders returns the pids /proc/locks lists as holding a flock on
// dir (Linux; nil elsewhere or when unknown).
func flockHolders(dir string) []int {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return nil
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil
	}
	suffix := ":" + strconv.FormatUint(uint64(st.Ino), 10)
	var pids []int
	for _, line := range strings.Split(string(b), "\n") {
		// 1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" { // "1: -> FLOCK …" is a waiter
			continue
		}
		if !strings.HasSuffix(f[5], suffix) {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// commandOf is the command line of pid, shortened, or "".
func commandOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return ""
	}
	c := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if r := []rune(c); len(r) > 80 {
		c = string(r[:79]) + "…"
	}
	return c
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

// lockSnapshot creates the lock file of snapshot directory snap and takes
// an exclusive flock on it, held until the file is closed.
func lockSnapshot(snap string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(snap, snapshotLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// snapshotInUse reports whether a reader holds the lock of snapshot
// directory snap.
func snapshotInUse(snap string) bool {
	f, err := os.Open(filepath.Join(snap, snapshotLock))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// lockDamage takes the exclusive flock on path (created when missing, a
// link never followed) and returns its release: the processes that
// record damage (damage.go) take turns.
func lockDamage(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
