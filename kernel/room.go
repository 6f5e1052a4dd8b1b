package kernel

import "sync/atomic"

// The first room of a new session's history, in messages: what a run
// gets before any run of its kernel ended, the least it gets (the prompt
// and an answer; a system message adds one) and the most (a longer run
// grows its history by appending, as every run did past the first room).
const (
	firstRoomDefault = 8
	firstRoomMin     = 2
	firstRoomMax     = 32
)

// roomHint sizes a new session's history from the runs of new sessions
// that ended before it: at least the length of the last one, shrinking by
// one message a run when runs get shorter. A Message is 248 bytes, so a
// room of 8 for a run that writes 4 messages was a kilobyte of memory to
// clear and collect on every such run; a fixed smaller room only moves
// the cost to the longer runs (RATIONALE.md, "The history's first room
// follows the runs (issue 45)"). It is a hint: a run longer than its room
// appends as before, and no message depends on it. The zero value is
// ready (no run ended yet); it is safe for concurrent use and shared by a
// Kernel's views.
type roomHint struct {
	last atomic.Int32
}

// room returns the first room for a new session's history, sys system
// messages included.
func (h *roomHint) room(sys int) int {
	n := int(h.last.Load())
	switch {
	case n == 0:
		n = firstRoomDefault
	case n < firstRoomMin+sys:
		n = firstRoomMin + sys
	}
	return n
}

// ended notes that a new session's run ended with n messages in its
// history (system messages included): the next room is at least n, and
// one less than the last room when n is smaller.
func (h *roomHint) ended(n int) {
	old := int(h.last.Load())
	if old > 0 && n < old-1 {
		n = old - 1
	}
	h.last.Store(int32(min(n, firstRoomMax)))
}
