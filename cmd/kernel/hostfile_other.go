//go:build !unix

package main

import (
	"io/fs"

	"github.com/agentkernel/agentkernel/kernel"
)

// fileID is nil: this system has no device and inode numbers to record.
func fileID(fs.FileInfo) *kernel.FileID { return nil }
