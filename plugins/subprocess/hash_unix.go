//go:build unix

package subprocess

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// copyChunk is how much of a plugin binary copyAndHash copies before it
// hands the part to the hash: a multiple of every page size (the hash maps
// each part), small enough for the hash to start early, large enough for
// few system calls. A variable for the tests.
var copyChunk int64 = 2 << 20

// copyAndHash copies src to dst and returns the sha256 of what dst holds
// then: the hash reads each part of the copy itself (through a populated
// read-only mapping where it can, a read otherwise) once that part is
// written, while the next part is copied. So the copy and the hash overlap
// (on two CPUs the wall time is about the hash's alone) and the bytes
// hashed are still exactly the bytes of the file the host executes,
// nobody else's: dst must be a file nobody else writes (the host's
// private copy). The copy goes through the kernel (io.Copy between files
// is copy_file_range on Linux): the binary never passes through a
// user-space buffer. RATIONALE.md, "Go plugin start: the copy and the hash
// overlap (issue 45)".
func copyAndHash(dst, src *os.File) ([]byte, error) {
	type part struct {
		end int64 // the copy's size so far
		err error // the copy failed
	}
	chunk := copyChunk
	if runtime.GOMAXPROCS(0) < 2 {
		// One CPU: nothing to overlap with; one part, one mapping.
		chunk = math.MaxInt64
	}
	parts := make(chan part, 64)
	stop := make(chan struct{})
	go func() {
		defer close(parts)
		var end int64
		for {
			n, err := io.CopyN(dst, src, chunk)
			end += n
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if n > 0 || err != nil {
				select {
				case parts <- part{end, err}:
				case <-stop:
					return
				}
			}
			if err != nil || n < chunk {
				return
			}
		}
	}()
	defer func() {
		close(stop)
		for range parts { // wait for the copier
		}
	}()
	h := sha256.New()
	var done int64
	buf := []byte(nil)
	for p := range parts {
		if p.err != nil {
			return nil, fmt.Errorf("copy: %w", p.err)
		}
		for done < p.end {
			n := min(p.end-done, chunk)
			if err := hashRange(h, dst, done, n, &buf); err != nil {
				return nil, err
			}
			done += n
		}
	}
	// Only this host writes dst: what it holds now is what was hashed.
	fi, err := dst.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() != done {
		return nil, fmt.Errorf("the copy holds %d bytes, %d were hashed", fi.Size(), done)
	}
	return h.Sum(nil), nil
}

// hashRange writes n bytes of f from off (a multiple of the page size) to
// h, through a populated read-only mapping, or read into *buf when the
// system will not map it.
func hashRange(h io.Writer, f *os.File, off, n int64, buf *[]byte) error {
	if int64(int(n)) == n {
		m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED|mapPopulate)
		if err == nil {
			_, _ = h.Write(m)
			return unix.Munmap(m)
		}
	}
	if *buf == nil {
		*buf = make([]byte, 1<<20)
	}
	if _, err := io.CopyBuffer(h, io.NewSectionReader(f, off, n), *buf); err != nil {
		return err
	}
	return nil
}
