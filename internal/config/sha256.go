package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// ParsePin reads a sha256 pin: 64 hex digits in either case, surrounding
// spaces ignored. It returns the pin in lower case, the form every
// comparison uses (see PinMatches), or an error that shows the value.
func ParsePin(s string) (string, error) {
	p := strings.ToLower(strings.TrimSpace(s))
	if len(p) != 64 {
		return "", fmt.Errorf("%q is not 64 hex digits", s)
	}
	if _, err := hex.DecodeString(p); err != nil {
		return "", fmt.Errorf("%q is not 64 hex digits", s)
	}
	return p, nil
}

// PinMatches reports whether pin (any case) is the hex digest sum (any
// case).
func PinMatches(pin, sum string) bool {
	return strings.EqualFold(strings.TrimSpace(pin), strings.TrimSpace(sum))
}

// FileSHA256 returns the hex sha256 of the file at path, as sha256sum
// prints it.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
