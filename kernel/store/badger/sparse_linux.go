package badger

import (
	"errors"
	"io"
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

// readData reads path up to the end of its last data extent: a crashed
// writer's value log is a 128 MiB file of which only the start is
// written, and its holes need not be read.
func readData(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	end := fi.Size()
	fd := int(f.Fd())
	var last int64
	for off := int64(0); off < fi.Size(); {
		start, err := syscall.Seek(fd, off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			end = last
			break
		}
		if err != nil {
			break // no SEEK_DATA here: read it all
		}
		stop, err := syscall.Seek(fd, start, seekHole)
		if err != nil {
			break
		}
		last, off = stop, stop
		end = min(fi.Size(), stop)
	}
	b := make([]byte, end)
	_, err = f.ReadAt(b, 0)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return b, err
}
