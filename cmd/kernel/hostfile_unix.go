//go:build unix

package main

import (
	"io/fs"
	"syscall"

	"github.com/agentkernel/agentkernel/kernel"
)

// fileID is the device and inode of fi (nil where the system has none).
func fileID(fi fs.FileInfo) *kernel.FileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return &kernel.FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}
}
