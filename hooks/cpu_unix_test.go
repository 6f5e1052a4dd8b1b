//go:build unix

package hooks

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process used so far (user and system, all
// threads). Benchmarks report it next to wall time: on a shared machine
// wall time measures the neighbours too.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
