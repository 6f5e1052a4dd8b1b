package wasm

import (
	"errors"

	"github.com/tetratelabs/wazero/experimental"
)

// ErrMemoryLimit: the guest tried to grow its memory past memory_mb. The
// call is stopped at once rather than left to thrash against the cap.
var ErrMemoryLimit = errors.New("memory limit exceeded")

// cappedAllocator gives an instance its linear memory, at most limit bytes
// (capacity from max: the whole cap is reserved up front, so growing never
// copies). The runtime's page limit is above the cap, so wazero lets a grow
// past the cap through to Reallocate, which refuses and reports it:
// memory.grow fails in the guest and the host stops the call.
type cappedAllocator struct {
	limit   uint64
	onLimit func()
	// mapped, if set, receives the mapping (for prefault).
	mapped **mappedMemory
}

// Allocate implements experimental.MemoryAllocator.
func (a cappedAllocator) Allocate(_, _ uint64) experimental.LinearMemory {
	if b, err := mapMemory(a.limit); err == nil {
		m := &mappedMemory{buf: b, onLimit: a.onLimit}
		if a.mapped != nil {
			*a.mapped = m
		}
		return m
	}
	// No address space for a mapping: the Go heap, growing by copying.
	return &heapMemory{limit: a.limit, onLimit: a.onLimit}
}

// mappedMemory is a private anonymous mapping of the whole cap. Its pages
// cost nothing until the guest touches them and go back to the system when
// the instance closes, instead of becoming garbage that the Go heap must
// zero again for the next instance. The Host closes an instance only when
// no call runs in it, so unmapping is safe.
type mappedMemory struct {
	buf     []byte
	onLimit func()
}

func (m *mappedMemory) Reallocate(size uint64) []byte {
	if m.buf == nil {
		return nil
	}
	if size > uint64(len(m.buf)) {
		m.onLimit()
		return nil
	}
	return m.buf[:size:len(m.buf)]
}

// prefault makes the first n bytes resident and writable without changing
// them, so that a pre-warmed instance's call does not pay page faults for
// memory its initialisation already sized. Best effort.
func (m *mappedMemory) prefault(n uint64) {
	if m.buf != nil {
		populateMemory(m.buf[:min(n, uint64(len(m.buf)))])
	}
}

func (m *mappedMemory) Free() {
	if m.buf != nil {
		unmapMemory(m.buf)
		m.buf = nil
	}
}

type heapMemory struct {
	buf     []byte
	limit   uint64
	onLimit func()
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.onLimit()
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	nb := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.limit))
	copy(nb, m.buf)
	m.buf = nb
	return m.buf
}

func (m *heapMemory) Free() { m.buf = nil }
