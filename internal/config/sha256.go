package config

import (
	"encoding/hex"
	"fmt"
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
