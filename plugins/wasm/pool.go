package wasm

import (
	"sync"
	"sync/atomic"
	"time"
)

// pool keeps up to size initialised reactor instances ready. Each instance
// is taken for exactly one call and never served again: after the call it
// is handed back only to be closed. A single refill goroutine, started by
// start and stopped (and waited for) by stop, closes used instances and
// instantiates replacements after calls end, so neither competes with the
// call itself. Safe for concurrent use.
type pool struct {
	m     *module
	ready chan *instance
	used  chan *instance
	wake  chan struct{}
	quit  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	hits, misses atomic.Int64 // calls served from the pool, and not
}

func newPool(m *module, size int) *pool {
	if size <= 0 {
		return nil
	}
	return &pool{
		m:     m,
		ready: make(chan *instance, size),
		used:  make(chan *instance, 2*size),
		wake:  make(chan struct{}, 1),
		quit:  make(chan struct{}),
	}
}

func (p *pool) start() {
	p.wg.Add(1)
	go p.refill()
}

// take returns a ready instance, or nil when none is (the caller then
// instantiates one itself).
func (p *pool) take() *instance {
	if p == nil {
		return nil
	}
	select {
	case <-p.quit:
		return nil
	default:
	}
	var in *instance
	select {
	case in = <-p.ready:
		p.hits.Add(1)
	default:
		p.misses.Add(1)
	}
	return in
}

// discard takes an instance whose call is over: the refill goroutine closes
// it and replaces what the call took. Without a pool (or once it stops) the
// instance is closed here. Instances that miss the goroutine are closed with
// the module's runtime anyway.
func (p *pool) discard(in *instance) {
	if p == nil {
		in.close()
		return
	}
	select {
	case <-p.quit:
		in.close()
		return
	default:
	}
	select {
	case p.used <- in:
	default:
		in.close()
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// closeUsed closes the instances handed back so far.
func (p *pool) closeUsed() {
	for {
		select {
		case in := <-p.used:
			in.close()
		default:
			return
		}
	}
}

func (p *pool) refill() {
	defer p.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		p.closeUsed()
		for len(p.ready) < cap(p.ready) {
			p.closeUsed()
			if open, _ := p.m.health.isOpen(); open {
				break // calls probe the module now; wait for one to wake us
			}
			// A ready instance holds a call's share of the budget. When
			// it is short (or calls wait for it), the pool stays as it
			// is until an instance of this module is discarded.
			release, ok := p.m.h.budget.tryAcquire(p.m.callCharge())
			if !ok {
				break
			}
			in, err := p.m.newReactorInstance(p.m.h.life, charge{releases: []func(){release}})
			if err != nil {
				select {
				case <-p.quit:
					return
				default:
				}
				if p.m.health.failure(err) {
					p.m.h.log.Error("pre-warming a WASM instance keeps failing: the module is unhealthy until a call's retry succeeds", "module", p.m.name, "error", err)
					break
				}
				p.m.h.log.Error("pre-warming a WASM instance failed", "module", p.m.name, "error", err, "retry_in", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-p.quit:
					t.Stop()
					return
				case <-t.C:
				}
				backoff = min(2*backoff, 10*time.Second)
				continue
			}
			p.m.health.success()
			backoff = 100 * time.Millisecond
			select {
			case p.ready <- in:
			case <-p.quit:
				in.close()
				return
			}
		}
		select {
		case in := <-p.used:
			in.close()
		case <-p.wake:
		case <-p.quit:
			return
		}
	}
}

// shrink closes the instances waiting in the pool, giving their share of
// the memory budget back. The refill goroutine fills the pool again after
// the module's next call, if the budget then has room.
func (p *pool) shrink() {
	if p == nil {
		return
	}
	for {
		select {
		case in := <-p.ready:
			in.close()
		default:
			return
		}
	}
}

// wakeUp makes the refill goroutine look at the pool again.
func (p *pool) wakeUp() {
	if p == nil {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop ends the refill goroutine, waits for it and closes the instances
// nobody took.
func (p *pool) stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		close(p.quit)
		p.wg.Wait()
		p.closeUsed()
		p.shrink()
	})
}
