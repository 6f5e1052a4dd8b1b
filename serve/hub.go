package serve

import (
	"context"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// The event hub. A run's events are marshalled and scrubbed as the kernel
// emits them, stored in the session's event log in batches (one store
// write per batch, written while the next batch gathers), and only then
// published: an event a client sees always has its id in the store, so a
// client that reconnects with Last-Event-ID resumes without a gap or a
// repeat, also after a restart.
//
// Publishing never blocks: each stream has a notification channel of one
// slot, and reads what it has not sent from the topic's recent events (or
// from the store when it fell behind) at its own pace. A client that stops
// reading holds up nobody but itself, and its writes time out.
// Why: RATIONALE.md, "Streams pull, runs never wait".
type hub struct {
	log   kernel.EventLog
	scrub func(string) string
	warn  func(string, ...any)

	mu     sync.Mutex
	topics map[string]*topic
	// inbox are the watchers of each owner's approvals (the page's live
	// list), by owner.
	inbox  map[string]map[chan struct{}]struct{}
	closed bool
	// closing is closed when the server drains: streams send what is
	// stored, a final notice, and end.
	closing chan struct{}
}

// recentCap is how many stored events a topic keeps for its streams.
const recentCap = 512

// highWater is how many unstored events make an emitting run wait for the
// store (bounded memory when the store is slower than the model).
const highWater = 8192

type topic struct {
	id   string
	refs int

	mu       sync.Mutex
	idle     *sync.Cond // signalled when a batch is stored
	pending  []kernel.StoredEvent
	flushing bool
	recent   []kernel.StoredEvent // the last stored events, in order
	subs     map[chan struct{}]struct{}
	failed   int // events the store refused
}

func newHub(log kernel.EventLog, scrub func(string) string, warn func(string, ...any)) *hub {
	return &hub{log: log, scrub: scrub, warn: warn, topics: map[string]*topic{}, inbox: map[string]map[chan struct{}]struct{}{}, closing: make(chan struct{})}
}

// acquire returns the session's topic, holding a reference until release.
func (h *hub) acquire(id string) *topic {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[id]
	if t == nil {
		t = &topic{id: id, subs: map[chan struct{}]struct{}{}}
		t.idle = sync.NewCond(&t.mu)
		h.topics[id] = t
	}
	t.refs++
	return t
}

func (h *hub) release(t *topic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.refs--
	if t.refs == 0 {
		delete(h.topics, t.id)
	}
}

// sink returns the kernel event sink of a run of t's session, owned by
// owner. The kernel serialises its calls.
func (h *hub) sink(t *topic, owner string) func(kernel.Event) {
	return func(e kernel.Event) {
		switch e.(type) {
		case kernel.ApprovalRequired, kernel.ApprovalResolved, kernel.RunCompleted, kernel.RunFailed:
			defer h.touchInbox(owner) // after the event is queued: the list is read from the store
		}
		b, err := kernel.MarshalEvent(e)
		if err != nil {
			h.warn("session %s: marshal %s event: %v", t.id, e.Type(), err)
			return
		}
		if s := string(b); h.scrub(s) != s {
			b = []byte(h.scrub(s))
		}
		h.add(t, kernel.StoredEvent{Type: e.Type(), Time: time.Now().UTC(), Data: b})
	}
}

// add queues ev for storing, starting the topic's writer if it is idle.
func (h *hub) add(t *topic, ev kernel.StoredEvent) {
	t.mu.Lock()
	for len(t.pending) >= highWater {
		t.idle.Wait()
	}
	t.pending = append(t.pending, ev)
	start := !t.flushing
	t.flushing = true
	t.mu.Unlock()
	if start {
		go h.flush(t)
	}
}

// flush stores the topic's pending events batch by batch until none is
// left, publishing each batch once it is stored. Its owner is the topic:
// wait returns only after it ends.
func (h *hub) flush(t *topic) {
	for {
		t.mu.Lock()
		batch := t.pending
		t.pending = nil
		if len(batch) == 0 {
			t.flushing = false
			t.idle.Broadcast()
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		first, err := h.log.AppendEvents(context.Background(), t.id, batch)
		t.mu.Lock()
		if err != nil {
			t.failed += len(batch)
			t.mu.Unlock()
			h.warn("session %s: %d events not stored (streams will not show them): %v", t.id, len(batch), err)
			continue
		}
		for i := range batch {
			batch[i].Seq = first + uint64(i)
		}
		t.recent = append(t.recent, batch...)
		if n := len(t.recent); n > recentCap {
			t.recent = append(t.recent[:0:0], t.recent[n-recentCap:]...)
		}
		for c := range t.subs {
			select {
			case c <- struct{}{}:
			default:
			}
		}
		t.idle.Broadcast()
		t.mu.Unlock()
	}
}

// wait returns once every event added so far is stored (or refused).
func (t *topic) wait() {
	t.mu.Lock()
	for t.flushing {
		t.idle.Wait()
	}
	t.mu.Unlock()
}

// subscribe registers a stream's notification channel.
func (t *topic) subscribe() chan struct{} {
	c := make(chan struct{}, 1)
	t.mu.Lock()
	t.subs[c] = struct{}{}
	t.mu.Unlock()
	return c
}

func (t *topic) unsubscribe(c chan struct{}) {
	t.mu.Lock()
	delete(t.subs, c)
	t.mu.Unlock()
}

// since returns the stored events after seq from the recent ones, and
// whether they cover everything after seq (else read the store).
func (t *topic) since(seq uint64) ([]kernel.StoredEvent, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.recent) == 0 {
		return nil, false
	}
	first := t.recent[0].Seq
	last := t.recent[len(t.recent)-1].Seq
	switch {
	case seq >= last:
		return nil, seq == last
	case seq+1 < first:
		return nil, false
	}
	out := make([]kernel.StoredEvent, last-seq)
	copy(out, t.recent[seq+1-first:])
	return out, true
}

// closeStreams ends every stream (drain).
func (h *hub) closeStreams() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
}

// watchInbox registers a watcher of owner's approvals: its channel gets a
// token whenever one may have changed.
func (h *hub) watchInbox(owner string) (chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	if h.inbox[owner] == nil {
		h.inbox[owner] = map[chan struct{}]struct{}{}
	}
	h.inbox[owner][c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.inbox[owner], c)
		if len(h.inbox[owner]) == 0 {
			delete(h.inbox, owner)
		}
		h.mu.Unlock()
	}
}

// touchInbox wakes owner's inbox watchers, never blocking.
func (h *hub) touchInbox(owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.inbox[owner] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
