package subprocess

import (
	"crypto/sha256"
	"io"
	"os"
)

// hashRead returns the sha256 of f's whole content, read from its start.
func hashRead(f *os.File) ([]byte, error) {
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, 1<<62), make([]byte, 1<<20)); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
