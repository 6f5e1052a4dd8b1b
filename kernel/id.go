package kernel

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"time"
)

// NewID returns a new identifier: 16 characters of Crockford base32, the
// first 10 encoding the time in milliseconds, so ids sort by creation.
func NewID() string {
	var b [10]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(errors.New("crypto/rand failed: " + err.Error())) // never happens on Linux
	}
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var out [16]byte
	var acc uint64
	bits, j := 0, 0
	for _, x := range b {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[j] = alphabet[(acc>>uint(bits))&31]
			j++
		}
	}
	return string(out[:])
}
