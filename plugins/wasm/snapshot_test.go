package wasm

import (
	"testing"
	"time"
)

// TestSnapshotClockStartsAfterTheImage: a snapshot instance's monotonic
// clock starts after the last reading the guest saw while the image was
// made (the Go runtime recorded its start then), and never goes back,
// with the clock granted or not.
func TestSnapshotClockStartsAfterTheImage(t *testing.T) {
	const base = int64(5 * time.Second)
	for _, real := range []bool{false, true} {
		nt := snapshotNanotime(base, real)
		prev := base
		for i := range 100 {
			v := nt()
			if v <= prev {
				t.Fatalf("clock granted %v: reading %d is %d, not after %d", real, i, v, prev)
			}
			prev = v
		}
	}
}

// TestSnapshotDataSegmentsRebuildTheImage: the data section a snapshot
// writes, applied to zeroed memory, is the image byte for byte, with
// short zero runs kept inside a segment and long ones between segments.
func TestSnapshotDataSegmentsRebuildTheImage(t *testing.T) {
	image := make([]byte, 5*snapshotGap)
	copy(image[10:], "abc")
	copy(image[10+3+100:], "def") // 100 zeros: same segment
	copy(image[3*snapshotGap:], "xyz")
	image[len(image)-1] = 7
	sec := dataSegments(image)
	r := &reader{b: sec}
	n, _ := r.u32()
	if n != 3 {
		t.Fatalf("%d segments, want 3", n)
	}
	got := make([]byte, len(image))
	for i := uint32(0); i < n; i++ {
		if flags, _ := r.byte(); flags != 0 {
			t.Fatalf("segment %d: flags %d", i, flags)
		}
		if op, _ := r.byte(); op != 0x41 {
			t.Fatalf("segment %d: offset opcode 0x%02x", i, op)
		}
		off, err := r.uleb(32) // offsets here are small and positive
		if err != nil {
			t.Fatal(err)
		}
		if end, _ := r.byte(); end != 0x0b {
			t.Fatalf("segment %d: no end", i)
		}
		size, _ := r.u32()
		b, err := r.bytes(size)
		if err != nil {
			t.Fatal(err)
		}
		copy(got[off:], b)
	}
	if string(got) != string(image) {
		t.Fatal("the segments do not rebuild the image")
	}
}
