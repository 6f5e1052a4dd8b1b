package proc

import (
	"runtime"
	"syscall"
	"unsafe"
)

// waitExited blocks until process pid has exited, without reaping it, so
// its pid (and process group id) stays reserved until the caller's Wait.
// It reports true: the group can be killed safely before the reap.
func waitExited(pid int) bool {
	const (
		pPID    = 1
		wExited = 4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}

// Spawner starts processes from one OS thread that stays locked for its
// whole life. On Linux a parent-death signal fires when the thread that
// forked the child exits, not the process; Go may end an idle thread that
// a goroutine left locked, which would kill a healthy process. A
// dedicated thread makes the signal mean "the owner is gone". A Spawner
// is safe for concurrent use until Stop.
type Spawner struct {
	reqs chan func()
	done chan struct{}
}

// NewSpawner starts the spawner's thread.
func NewSpawner() *Spawner {
	s := &Spawner{reqs: make(chan func()), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *Spawner) loop() {
	// Never unlocked: when Stop ends this goroutine, the thread exits with
	// it, and every process it started gets its parent-death signal.
	runtime.LockOSThread()
	defer close(s.done)
	for f := range s.reqs {
		f()
	}
}

// Do runs start on the spawner's thread.
func (s *Spawner) Do(start func() error) error {
	errc := make(chan error, 1)
	s.reqs <- func() { errc <- start() }
	return <-errc
}

// Stop ends the spawner's thread; Do must not be called after it.
func (s *Spawner) Stop() {
	close(s.reqs)
	<-s.done
}
