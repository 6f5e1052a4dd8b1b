package wasm

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// stackAllowanceMB is what one call may cost in native call stacks:
// wazero v1.12 gives every call into a module a Go-heap stack of 10 KiB
// and, when it is full, copies it into one twice as large, as long as the
// old one is at most 50,000,000 bytes long; past that it traps with a stack
// overflow. The last stack is 83.9 MB, and all the stacks one call
// allocates add up to 168 MB, which stay resident until the Go heap
// collects them. No wazero option lowers that ceiling (see RATIONALE.md,
// "WASM: counting wazero's call stack"), so the budget counts it for every
// call. A guest compiled from Go keeps its stacks in linear memory and
// never comes near it; one written in C, Rust or by hand can.
const stackAllowanceMB = 160

// DefaultMemoryBudgetMB is the host memory budget when none is configured:
// half the machine's physical memory, at least 1 GiB (4 GiB where the
// platform does not say how much it has).
func DefaultMemoryBudgetMB() int {
	if total := physicalMemoryMB(); total > 0 {
		return max(1024, total/2)
	}
	return 4096
}

// ErrMemoryBudget: a call could not get its share of the host's memory
// budget before its deadline.
var ErrMemoryBudget = errors.New("wasm memory budget exhausted")

// memoryBudget is the host-wide ceiling on what WASM instances may hold at
// once. Every instance counts its module's memory_mb (its linear memory is
// reserved at that size and may all be touched) plus stackAllowanceMB (the
// native stacks of the call it serves, which stay allocated until the
// instance is closed), from before it is instantiated until it is closed,
// whether it waits in a pool or serves a call. Calls that do not fit close
// the idle instances of every pool and then wait in line, first come first
// served, within ctx (see tool.Queue); pool refills take
// only what is free while no call waits. Safe for concurrent use.
type memoryBudget struct {
	mb  int64
	sem *semaphore.Weighted

	inUse   atomic.Int64 // MiB held now
	peak    atomic.Int64 // most MiB ever held at once
	waited  atomic.Int64 // acquisitions that had to wait
	refused atomic.Int64 // pool refills skipped for want of budget
}

func newMemoryBudget(mb int) *memoryBudget {
	return &memoryBudget{mb: int64(mb), sem: semaphore.NewWeighted(int64(mb))}
}

// fits reports whether a request of mb could ever be granted.
func (b *memoryBudget) fits(mb int) bool { return int64(mb) <= b.mb }

// acquire takes mb MiB, waiting until ctx is done. The returned release
// gives it back and may be called more than once.
func (b *memoryBudget) acquire(ctx context.Context, mb int) (release func(), err error) {
	n := int64(mb)
	if !b.sem.TryAcquire(n) {
		b.waited.Add(1)
		if err := b.sem.Acquire(ctx, n); err != nil {
			return nil, err
		}
	}
	return b.took(n), nil
}

// tryAcquire takes mb MiB only if they are free now.
func (b *memoryBudget) tryAcquire(mb int) (release func(), ok bool) {
	n := int64(mb)
	if !b.sem.TryAcquire(n) {
		b.refused.Add(1)
		return nil, false
	}
	return b.took(n), true
}

func (b *memoryBudget) took(n int64) func() {
	now := b.inUse.Add(n)
	for p := b.peak.Load(); now > p && !b.peak.CompareAndSwap(p, now); p = b.peak.Load() {
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			b.inUse.Add(-n)
			b.sem.Release(n)
		})
	}
}

// waitError is a call whose deadline came while it waited for the budget.
func (b *memoryBudget) waitError(ctx context.Context, mb int) error {
	err := stoppedError(ctx, &instanceIO{})
	var ge *guestError
	if errors.As(err, &ge) && ge.code == "timeout" {
		ge.msg += fmt.Sprintf(" while waiting for %d MiB of the host's %d MiB WASM memory budget (limits.wasm_memory_budget_mb; each running instance counts memory_mb + %d MiB of stack)", mb, b.mb, stackAllowanceMB)
		ge.err = errors.Join(ge.err, ErrMemoryBudget)
	}
	return err
}

// charge is what the instance of one call holds against the budget.
type charge struct {
	releases []func()
}

// release gives everything back, once.
func (c *charge) release() {
	for _, r := range c.releases {
		r()
	}
	c.releases = nil
}

// stackOverflow reports whether a guest's call died of wazero's stack
// overflow trap. wazero's error value for it is internal, so its message
// is what tells; nothing but when memory is collected depends on it.
func stackOverflow(err error) bool {
	return err != nil && strings.Contains(err.Error(), "wasm error: stack overflow")
}

// collectStacks collects the garbage of an instance that died of a stack
// overflow, and returns it to the system, before its share of the budget
// is given back: up to 168 MB of native stack that the Go heap would
// otherwise keep until it next doubles (and keep resident after that, since
// the next instance's stacks, of other sizes, rarely fit in the holes), so
// the next instance the budget lets in would come on top of it.
func collectStacks() { debug.FreeOSMemory() }
