package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/agentkernel/agentkernel/internal/faults"
)

// armFaults installs the fault hook $AK_TEST_FAULT asks for in this test
// binary acting as the CLI (a kernel serve replica of a crash test):
// "POINT[:ARG]=ACTION", where POINT is one of internal/faults' points,
// ARG (when given) must equal the point's argument, and ACTION is stop
// (SIGSTOP: the process pauses where it stands, until the test continues
// it) or kill (SIGKILL: it dies there). The first time the point is
// reached the action is taken, and the hook is then removed. A test file:
// the kernel itself never reads the variable.
func armFaults() {
	spec := os.Getenv("AK_TEST_FAULT")
	if spec == "" {
		return
	}
	where, action, ok := strings.Cut(spec, "=")
	point, arg, withArg := strings.Cut(where, ":")
	sig := map[string]syscall.Signal{"stop": syscall.SIGSTOP, "kill": syscall.SIGKILL}[action]
	if !ok || sig == 0 {
		fmt.Fprintf(os.Stderr, "AK_TEST_FAULT=%q: want POINT[:ARG]=stop|kill\n", spec)
		os.Exit(2)
	}
	faults.Set(func(p, a string) {
		if p != point || withArg && a != arg {
			return
		}
		faults.Set(nil)
		fmt.Fprintf(os.Stderr, "fault: %s (%s) reached: %s\n", p, a, action)
		// To this thread: the signal is taken on the way out of the
		// call, before the goroutine runs one more instruction (sent to
		// the process, another thread might take it while this one goes
		// on to the side effect).
		runtime.LockOSThread() // the thread the tid names runs this goroutine
		syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
		runtime.UnlockOSThread()
	})
}
