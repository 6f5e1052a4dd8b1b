//go:build !linux

package badger

import "os"

// copySparse copies in to out, skipping blocks of zeros.
func copySparse(out, in *os.File, size int64) error {
	return copyRange(out, in, 0, size, make([]byte, 256<<10))
}

// readData reads path.
func readData(path string) ([]byte, error) { return os.ReadFile(path) }
