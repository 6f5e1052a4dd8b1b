//go:build !linux

package wasm

import "syscall"

const utimeOmit = -2

func fcntl(uintptr, int, int) (int, error) { return 0, syscall.ENOSYS }

func futimens(int, int64, int64) error { return syscall.ENOSYS }
