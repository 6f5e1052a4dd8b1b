package kernel

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
	"time"
)

// NewID returns a new identifier: 16 characters of Crockford base32, the
// first 10 encoding the time in milliseconds, so ids sort by creation.
func NewID() string { return NewIDAt(time.Now()) }

// NewIDAt is NewID for a caller that has just read the clock: the id
// encodes now (a wall-clock reading, time.Now's, never a configured or
// test clock's) instead of a second reading microseconds later. On a
// virtual machine a clock reading costs ~100-150 ns (RATIONALE.md, "Clock
// readings on the loop's path (issue 45)").
func NewIDAt(now time.Time) string {
	var b [10]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	randomBytes(b[6:])
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

// idRand holds crypto/rand bytes read idRandSize at a time for NewID:
// one read a call cost more than the rest of NewID (RATIONALE.md, "Policy
// expressions: a closure fast path beside the VM (issue 45)"). Each byte
// is handed out once and zeroed, so IDs are exactly as unpredictable as
// with a read per call; left counts the bytes not yet handed out, at the
// end of buf.
var idRand struct {
	sync.Mutex
	buf  [idRandSize]byte
	left int
}

const idRandSize = 512

// randomBytes fills dst (at most idRandSize bytes) from idRand, reading
// crypto/rand again when fewer bytes are left.
func randomBytes(dst []byte) {
	idRand.Lock()
	defer idRand.Unlock()
	if idRand.left < len(dst) {
		if _, err := rand.Read(idRand.buf[:]); err != nil {
			panic(errors.New("crypto/rand failed: " + err.Error())) // never happens on Linux
		}
		idRand.left = len(idRand.buf)
	}
	from := len(idRand.buf) - idRand.left
	n := copy(dst, idRand.buf[from:])
	clear(idRand.buf[from : from+n])
	idRand.left -= n
}
