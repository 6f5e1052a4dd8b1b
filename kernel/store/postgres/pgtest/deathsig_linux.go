package pgtest

import "syscall"

// dieWithParent has the kernel kill the process when the thread that
// started it ends (startOwnThread's thread lives as long as the test
// binary).
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
