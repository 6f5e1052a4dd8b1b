package kernel

import (
	"bytes"
	"strings"
	"sync"
	"testing"
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
