//go:build !unix

package privfile

import (
	"io/fs"
)

// No O_NOFOLLOW or O_NONBLOCK here: OpenWrite checks the path with Lstat.
const (
	oNoFollow = 0
	oNonblock = 0
	oCloexec  = 0
)

func owner(fs.FileInfo) int    { return -1 }
func links(fs.FileInfo) uint64 { return 1 }
func isLoop(error) bool        { return false }

// Lock is a no-op where the system has no flock.
func Lock(path string) (unlock func(), err error) { return func() {}, nil }
