//go:build unix

package wasm

import (
	"errors"
	"os"
	"syscall"
)

func mapMemory(n uint64) ([]byte, error) {
	if n == 0 || n > 1<<32 {
		return nil, errors.New("no mapping for this size")
	}
	return syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
}

func unmapMemory(b []byte) { _ = syscall.Munmap(b) }

// mapFile maps a file read-only.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || size > 1<<40 {
		return nil, errors.New("no mapping for this size")
	}
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}
