package wasm

import "runtime"

// DefaultMaxRunning is the host's limit on guests running at once when
// none is configured: one fewer than the CPUs Go may use, at least 1.
//
// A guest that computes holds its goroutine's P (Go's processor): wazero's
// machine code cannot be preempted, and it comes back to Go only at loop
// headers and function entries, where Go preempts it at most every 10 ms.
// The goroutine that notices a call's deadline (wazero's close-on-deadline
// watcher) and the timers of calls waiting in line need a P too. With
// more running guests than Ps, they get one only when the scheduler next
// rotates, and a runaway returns tens to thousands of milliseconds after
// its deadline (50 runaways on 2 CPUs: 2 to 3 s late). With one P always
// left over, they run at once.
// Measurements: RATIONALE.md, "WASM: guests running at once stay below the
// CPUs (limits.wasm_max_running)".
func DefaultMaxRunning() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// runSlots bounds the guests running at once across all modules of a Host.
// Safe for concurrent use.
type runSlots chan struct{}

func newRunSlots(n int) runSlots { return make(runSlots, n) }
