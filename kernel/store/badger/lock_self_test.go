//go:build linux

package badger

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// TestOpenWaitsForItsOwnForkedLock: Badger's lock is a flock on the store
// directory, so a child forked while a Store was open holds the lock
// until its exec closes the descriptor, although the Store was closed;
// /proc/locks names this process. A second Open in the same process waits
// for that child instead of failing with "another kernel (pid <its own>)
// holds it" (cmd/kernel's TestPolicyDiffCorpus saw that once: two
// `kernel run`s in a row in one test process). Here the child is real: a
// process that inherits the locked descriptor and exits when its stdin
// closes, after this process has let go of its own copy.
func TestOpenWaitsForItsOwnForkedLock(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	child := exec.Command("cat")
	child.ExtraFiles = []*os.File{d}
	in, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	d.Close() // the child's copy alone holds the lock now
	if !heldBySelf(dir) || probeLock(dir) != heldByWriter {
		t.Fatalf("the child's inherited lock: holder %v, held by self %v", probeLock(dir), heldBySelf(dir))
	}

	waiting := make(chan struct{})
	var once sync.Once
	onLockWait = func() { once.Do(func() { close(waiting) }) }
	defer func() { onLockWait = nil }()
	opened := make(chan error, 1)
	go func() {
		s, err := Open(dir, Options{Logger: quietLogger()})
		if err == nil {
			err = s.Close()
		}
		opened <- err
	}()
	// Open waits (it cannot have the lock while the child holds it); then
	// the child's end lets the lock go.
	select {
	case <-waiting:
	case err := <-opened:
		in.Close()
		_ = child.Wait()
		t.Fatalf("Open did not wait for a lock only its own process's child held: %v", err)
	}
	in.Close()
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		if errors.Is(err, ErrLocked) {
			t.Fatalf("Open did not wait for a lock only its own process's child held: %v", err)
		}
		t.Fatal(err)
	}
}
