//go:build unix

package subprocess

import (
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestHashCopy checks hashCopy (the mapping) and hashRead (its fallback)
// against sha256 of the same bytes, for an empty file (which is not
// mapped), a short one and one that is not a whole number of pages, read
// from a file whose offset is not at its start (as after the copy).
func TestHashCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		size int
	}{{"empty", 0}, {"short", 1}, {"pages and a bit", 3<<20 + 17}} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tc.size)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			want := sha256.Sum256(b)
			f, err := os.Create(filepath.Join(t.TempDir(), "copy"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(b); err != nil {
				t.Fatal(err)
			}
			for name, hash := range map[string]func(*os.File) ([]byte, error){"hashCopy": hashCopy, "hashRead": hashRead} {
				got, err := hash(f)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if string(got) != string(want[:]) {
					t.Errorf("%s = %x, want %x", name, got, want)
				}
			}
		})
	}
}
