//go:build !freebsd

package wasm

import "syscall"

// oDSYNC is the host's O_DSYNC, what a guest's O_DSYNC open becomes.
const oDSYNC = syscall.O_DSYNC
