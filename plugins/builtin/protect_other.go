//go:build !unix

package builtin

import "io/fs"

// linkCount is 1: hard links are not counted here.
func linkCount(fs.FileInfo) uint64 { return 1 }
