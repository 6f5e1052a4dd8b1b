//go:build !unix

package badger

import (
	"os"
	"strings"
)

// StoreSize is the size of the files of the store in dir (apparent sizes
// here) and how many files it has.
func StoreSize(dir string) (bytes int64, files int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			bytes += fi.Size()
			files++
		}
	}
	return bytes, files
}
