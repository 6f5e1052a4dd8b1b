//go:build unix

package builtin

import "syscall"

// oNonblock keeps opening a FIFO from blocking; it changes nothing for
// regular files.
const oNonblock = syscall.O_NONBLOCK
