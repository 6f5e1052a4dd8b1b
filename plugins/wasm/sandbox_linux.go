package wasm

import (
	"syscall"
	"unsafe"
)

// utimeOmit is Linux's UTIME_OMIT for utimensat.
const utimeOmit = (1 << 30) - 2

func fcntl(fd uintptr, cmd, arg int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, uintptr(cmd), uintptr(arg))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// futimens sets the times of an open descriptor: utimensat with a NULL path.
func futimens(fd int, atim, mtim int64) error {
	ts := [2]syscall.Timespec{timespec(atim), timespec(mtim)}
	_, _, e := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
