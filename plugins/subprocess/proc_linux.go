package subprocess

import (
	"runtime"
	"syscall"
	"unsafe"
)

// waitExited blocks until process pid has exited, without reaping it, so
// its pid (and process group id) stays reserved until cmd.Wait.
func waitExited(pid int) {
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
			return
		}
	}
}

// spawner starts processes from one OS thread that stays locked for its
// whole life. On Linux a parent-death signal fires when the thread that
// forked the child exits, not the process; Go may end an idle thread that
// a goroutine left locked, which would kill a healthy plugin. A dedicated
// thread makes the signal mean "the host is gone".
type spawner struct {
	reqs chan func()
	done chan struct{}
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	// Never unlocked: when stop ends this goroutine, the thread exits with
	// it, after every plugin it started has been killed.
	runtime.LockOSThread()
	defer close(s.done)
	for f := range s.reqs {
		f()
	}
}

// do runs start on the spawner's thread.
func (s *spawner) do(start func() error) error {
	errc := make(chan error, 1)
	s.reqs <- func() { errc <- start() }
	return <-errc
}

// stop ends the spawner; do must not be called after it.
func (s *spawner) stop() {
	close(s.reqs)
	<-s.done
}
