//go:build unix

package main

import (
	"io/fs"
	"syscall"

	"github.com/agentkernel/agentkernel/kernel"
)

// The open flags of the kernel's own writes (openPrivate): never through a
// symbolic link, and never blocked by a FIFO put in the file's place.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonblock = syscall.O_NONBLOCK
)

// fileID is the device and inode of fi (nil where the system has none).
func fileID(fi fs.FileInfo) *kernel.FileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return &kernel.FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}
}

// linkCount is the number of hard links to fi (1 where unknown).
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
