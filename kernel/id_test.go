package kernel

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRandomBytesAreNeverHandedOutTwice draws four buffers' worth of the
// pool in NewID's 4-byte pieces: no piece is zero (a byte handed out
// after it was cleared) and no buffer's worth repeats the one before (a
// pool not advanced or not refilled).
func TestRandomBytesAreNeverHandedOutTwice(t *testing.T) {
	var stream []byte
	for range 4 * idRandSize / 4 {
		var b [4]byte
		randomBytes(b[:])
		if b == [4]byte{} {
			t.Fatalf("piece %d is zero", len(stream)/4)
		}
		stream = append(stream, b[:]...)
	}
	for w := 1; w < 4; w++ {
		prev, cur := stream[(w-1)*idRandSize:w*idRandSize], stream[w*idRandSize:(w+1)*idRandSize]
		if bytes.Equal(prev, cur) {
			t.Fatalf("window %d repeats window %d", w, w-1)
		}
	}
	seen := map[[4]byte]int{}
	for i := 0; i < len(stream); i += 4 {
		seen[[4]byte(stream[i:i+4])]++
	}
	if len(seen) < len(stream)/4-1 {
		t.Fatalf("%d distinct pieces of %d", len(seen), len(stream)/4)
	}
}

// TestNewIDConcurrent: NewID from many goroutines (the pool under -race)
// gives well-formed IDs.
func TestNewIDConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	ids := make([][]string, 8)
	for g := range ids {
		wg.Go(func() {
			for range 500 {
				ids[g] = append(ids[g], NewID())
			}
		})
	}
	wg.Wait()
	for _, list := range ids {
		for _, id := range list {
			if len(id) != 16 || strings.Trim(id, "0123456789abcdefghjkmnpqrstvwxyz") != "" {
				t.Fatalf("malformed id %q", id)
			}
		}
	}
}

// TestNewIDAtEncodesItsTime: NewIDAt's first 10 characters are the given
// time in milliseconds (what NewID encodes from its own reading), so ids
// made from a caller's reading sort by that reading.
func TestNewIDAtEncodesItsTime(t *testing.T) {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	decode := func(id string) int64 {
		var v uint64
		for _, c := range id[:10] {
			v = v<<5 | uint64(strings.IndexRune(alphabet, c))
		}
		return int64(v >> 2) // 50 bits: the 48-bit time and 2 random bits
	}
	base := time.Date(2026, 11, 29, 3, 50, 0, 0, time.UTC)
	var prev string
	for i, d := range []time.Duration{0, time.Millisecond, time.Second, 24 * time.Hour} {
		at := base.Add(d)
		id := NewIDAt(at)
		if len(id) != 16 {
			t.Fatalf("NewIDAt(%v) = %q: %d characters, want 16", at, id, len(id))
		}
		if got := decode(id); got != at.UnixMilli() {
			t.Fatalf("NewIDAt(%v) encodes %d ms, want %d", at, got, at.UnixMilli())
		}
		if i > 0 && id <= prev {
			t.Fatalf("NewIDAt(%v) = %q sorts before the earlier %q", at, id, prev)
		}
		prev = id
	}
	if got, now := decode(NewID()), time.Now().UnixMilli(); got > now || now-got > 60_000 {
		t.Fatalf("NewID encodes %d ms, now is %d", got, now)
	}
}
