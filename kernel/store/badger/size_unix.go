//go:build unix

package badger

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// StoreSize is the space the files of the store in dir take on disk
// (allocated blocks; snapshots and quarantined copies left out) and how
// many files it has.
func StoreSize(dir string) (bytes int64, files int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(dir, e.Name()), &st) != nil {
			continue
		}
		bytes += int64(st.Blocks) * 512
		files++
	}
	return bytes, files
}
