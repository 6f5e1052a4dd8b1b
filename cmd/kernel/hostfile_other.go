//go:build !unix

package main

import (
	"io/fs"

	"github.com/agentkernel/agentkernel/kernel"
)

// No O_NOFOLLOW or O_NONBLOCK here: openPrivate checks the path with Lstat
// instead.
const (
	oNoFollow = 0
	oNonblock = 0
)

// fileID is nil: this system has no device and inode numbers to record.
func fileID(fs.FileInfo) *kernel.FileID { return nil }

// linkCount is 1: hard links are not counted here.
func linkCount(fs.FileInfo) uint64 { return 1 }
