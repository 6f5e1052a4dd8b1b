//go:build unix

package subprocess

import (
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestCopyAndHash checks copyAndHash against sha256 of the same bytes,
// and the copy against the source, for an empty file, a short one, and
// sizes around the part size (a whole number of parts, one byte more or
// less): the overlap of the copy and the hash must hash every byte of the
// copy once, in order. With one page per part the hash maps many parts;
// the default part size is tried too. At least two Ps, so that the parts
// overlap (with one, copyAndHash copies whole and hashes once).
func TestCopyAndHash(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	r := rand.New(rand.NewPCG(1, 2))
	page := int64(os.Getpagesize())
	for _, chunk := range []int64{page, copyChunk} {
		for _, size := range []int64{0, 1, chunk - 1, chunk, chunk + 1, 3*chunk + 17} {
			b := make([]byte, size)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			want := sha256.Sum256(b)
			dir := t.TempDir()
			srcPath := filepath.Join(dir, "src")
			if err := os.WriteFile(srcPath, b, 0o600); err != nil {
				t.Fatal(err)
			}
			src, err := os.Open(srcPath)
			if err != nil {
				t.Fatal(err)
			}
			dst, err := os.Create(filepath.Join(dir, "copy"))
			if err != nil {
				t.Fatal(err)
			}
			old := copyChunk
			copyChunk = chunk
			got, err := copyAndHash(dst, src)
			copyChunk = old
			src.Close()
			dst.Close()
			if err != nil {
				t.Fatalf("part %d, size %d: %v", chunk, size, err)
			}
			if string(got) != string(want[:]) {
				t.Errorf("part %d, size %d: sum %x, want %x", chunk, size, got, want)
			}
			copied, err := os.ReadFile(dst.Name())
			if err != nil {
				t.Fatal(err)
			}
			if string(copied) != string(b) {
				t.Errorf("part %d, size %d: the copy differs from the source (%d bytes)", chunk, size, len(copied))
			}
		}
	}
}
