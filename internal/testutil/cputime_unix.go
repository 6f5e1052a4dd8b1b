//go:build unix

package testutil

import (
	"syscall"
	"time"
)

// CPUTime is the process's user and system CPU time so far, all threads
// and the GC included. Benchmarks report it per operation next to the wall
// time: on a shared machine the wall time measures the neighbours too.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
