package badger

import (
	"errors"
	"os"
	"syscall"
)

const (
	seekData = 3 // SEEK_DATA
	seekHole = 4 // SEEK_HOLE
)

// copySparse copies the data extents of in (up to size) to out, finding
// them with SEEK_DATA/SEEK_HOLE so the holes are not even read.
func copySparse(out, in *os.File, size int64) error {
	buf := make([]byte, 256<<10)
	fd := int(in.Fd())
	for off := int64(0); off < size; {
		start, err := syscall.Seek(fd, off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil { // no SEEK_DATA on this file system: read it all
			return copyRange(out, in, off, size, buf)
		}
		end, err := syscall.Seek(fd, start, seekHole)
		if err != nil {
			return copyRange(out, in, start, size, buf)
		}
		end = min(end, size)
		if err := copyRange(out, in, start, end, buf); err != nil {
			return err
		}
		off = end
	}
	return nil
}
