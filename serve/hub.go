package serve

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/agentkernel/agentkernel/kernel"
)

// The event hub. A run's events are marshalled and scrubbed as the kernel
// emits them, stored in the session's event log in batches (one store
// write per batch, written while the next batch gathers), and only then
// published: an event a client sees always has its id in the store, so a
// client that reconnects with Last-Event-ID resumes without a gap or a
// repeat, also after a restart.
//
// While a run whose store can commit a step with events
// (kernel.StepEventCommitter) is attached to the topic, its events are not
// written on their own at once: they wait (at most linger) for the run's
// next step, and are stored in the step's own transaction, so a step and
// the events before it cost one sync, not two. Events that no step takes
// within linger, and those left when the run ends, are stored as above.
// Why: RATIONALE.md, "A run's events ride its step's commit".
//
// Publishing never blocks: each stream has a notification channel of one
// slot, and reads what it has not sent from the topic's recent events (or
// from the store when it fell behind) at its own pace. A client that stops
// reading holds up nobody but itself, and its writes time out.
// Why: RATIONALE.md, "Streams pull, runs never wait".
type hub struct {
	log kernel.EventLog
	// steps is log as a StepEventCommitter, or nil.
	steps kernel.StepEventCommitter
	// linger is how long an attached run's events wait for its next
	// step before they are stored on their own.
	linger time.Duration
	scrub  func(string) string
	warn   func(string, ...any)
	// announce tells the other replicas (on a shared store) that owner's
	// approvals may have changed; nil without replicas.
	announce func(ctx context.Context, owner string)

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

// defaultLinger is hub.linger: far below what a user notices of a live
// stream, and far above the time a run takes from an event to its next
// step when neither a model nor a tool is waited for.
const defaultLinger = 5 * time.Millisecond

// maxAttach caps the events stored with one step (the rest are stored
// on their own, after).
const maxAttach = 256

type topic struct {
	id   string
	refs int
	h    *hub

	mu       sync.Mutex
	idle     *sync.Cond // signalled when a batch is stored
	pending  []fencedEvent
	flushing bool // a writer (flush, or a step's commit) is storing
	// attached counts the runs whose steps take the pending events
	// (commitStep); timer stores them once linger has passed.
	attached int
	timer    *time.Timer
	recent   []kernel.StoredEvent // the last stored events, in order
	subs     map[chan struct{}]struct{}
	failed   int // events the store refused
	// head is the largest event seq known stored, by this server or (on a
	// shared store) another replica.
	head uint64
	// runner is the span of the run that holds the session, whose events
	// the topic publishes (follow); nil between runs.
	runner *eventSpan
}

func newHub(log kernel.EventLog, scrub func(string) string, warn func(string, ...any)) *hub {
	steps, _ := log.(kernel.StepEventCommitter)
	linger := defaultLinger
	if d := lingerOverride.Load(); d != nil {
		linger = *d
	}
	return &hub{log: log, steps: steps, linger: linger, scrub: scrub, warn: warn, topics: map[string]*topic{}, inbox: map[string]map[chan struct{}]struct{}{}, closing: make(chan struct{})}
}

// acquire returns the session's topic, holding a reference until release.
func (h *hub) acquire(id string) *topic {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[id]
	if t == nil {
		t = &topic{id: id, h: h, subs: map[chan struct{}]struct{}{}}
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

// fencedEvent is an event waiting to be stored with the token of the
// lease its run held (kernel.EventLog's fence; 0 without one).
type fencedEvent struct {
	ev    kernel.StoredEvent
	fence uint64
}

// sink returns the kernel event sink of a run (with ctx) of t's session,
// owned by owner, holding lease (on a shared store; else nil). The kernel serialises its calls. Every
// event is stored with the lease's token, so the store refuses the
// events of a run whose lease is lost, whenever this process notices: the
// session is another replica's, and what the late run says is not its
// history. Events emitted once this process knows the lease is lost are
// dropped at once. Events the run's last step stored already (commitEnd)
// are not stored again.
func (h *hub) sink(ctx context.Context, t *topic, owner string, lease *kernel.HeldLease) func(kernel.Event) {
	return h.runSink(ctx, t, owner, lease, nil)
}

// runSink is sink for a run with its link l (attach; nil without).
func (h *hub) runSink(ctx context.Context, t *topic, owner string, lease *kernel.HeldLease, l *runLink) func(kernel.Event) {
	ctx = context.WithoutCancel(ctx) // a cancelled run's last events are announced too
	var fence uint64
	if lease != nil {
		fence = lease.Token()
	}
	if l != nil {
		l.fence = fence
	}
	return func(e kernel.Event) {
		stored := l != nil && l.storedAhead(e)
		if !stored && lease != nil && lease.Err() != nil {
			return
		}
		switch e.(type) {
		case kernel.ApprovalRequired, kernel.ApprovalResolved, kernel.RunCompleted, kernel.RunFailed:
			defer h.touchInbox(owner) // after the event is queued: the list is read from the store
			if h.announce != nil {
				defer h.announce(ctx, owner)
			}
		}
		if stored {
			return
		}
		if ev, ok := h.encode(t, fence, e); ok {
			h.add(t, ev)
		}
	}
}

// encode marshals and scrubs e for storing with fence.
func (h *hub) encode(t *topic, fence uint64, e kernel.Event) (fencedEvent, bool) {
	// Encoded into a pooled buffer, then copied once to its exact size:
	// the stored bytes are the event's only allocation.
	buf := encodeBufs.Get().(*[]byte)
	enc, err := kernel.AppendEvent((*buf)[:0], e)
	if err != nil {
		encodeBufs.Put(buf)
		h.warn("session %s: marshal %s event: %v", t.id, e.Type(), err)
		return fencedEvent{}, false
	}
	b := slices.Clone(enc)
	if cap(enc) <= maxPooledEncode {
		*buf = enc
		encodeBufs.Put(buf)
	}
	// Scrubbed once (the scrubber is the costlier half): the same bytes
	// are stored and streamed to every subscriber. The scrubber reads b
	// through a string that shares its memory (no copy): b is new here and
	// never written again, and what the scrubber changes comes back as a
	// string of its own.
	// Why: RATIONALE.md, "A run through kernel serve, sixth round (issue 45)".
	if len(b) > 0 {
		s := unsafe.String(&b[0], len(b))
		if c := h.scrub(s); c != s {
			b = []byte(c)
		}
	}
	return fencedEvent{kernel.StoredEvent{Type: e.Type(), Time: time.Now().UTC(), Data: b}, fence}, true
}

// encodeBufs are encode's scratch buffers; one that grew past
// maxPooledEncode (an event with a large tool argument or answer) is left
// to the collector.
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledEncode = 64 << 10

// add queues ev for storing: at once, or, while a run is attached, with
// its next step (or after linger).
func (h *hub) add(t *topic, ev fencedEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.pending) >= highWater {
		t.startLocked()
		t.idle.Wait()
	}
	t.pending = append(t.pending, ev)
	switch {
	case t.flushing:
		// The writer stores it next (or, a step's commit, leaves it
		// to the timer it starts).
	case t.attached > 0 && h.linger > 0:
		if t.timer == nil {
			var tm *time.Timer
			tm = time.AfterFunc(h.linger, func() {
				t.mu.Lock()
				defer t.mu.Unlock()
				if t.timer == tm {
					t.timer = nil
				}
				t.startLocked()
			})
			t.timer = tm
		}
	default:
		t.startLocked()
	}
}

// startLocked starts the writer when events are pending and none runs
// (the caller holds t.mu).
func (t *topic) startLocked() {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if t.flushing || len(t.pending) == 0 {
		return
	}
	t.flushing = true
	go t.h.flush(t)
}

// runLink is what ties a run to its topic while it is attached: the
// kernel.RunOptions CommitStep and CommitEnd of the run, and the events
// its last step stored (which the run's sink then skips).
type runLink struct {
	h     *hub
	t     *topic
	store kernel.Store
	fence uint64 // the run's lease token (sink)

	mu sync.Mutex
	// ahead are the types of the events commitEnd stored, which the
	// kernel emits next, in this order.
	ahead []string
}

// attach makes the steps of a run on t's session take its pending events
// (when the store can) until detach; it returns the run's link, or nil.
func (h *hub) attach(t *topic, store kernel.Store) *runLink {
	if h.steps == nil {
		return nil
	}
	t.mu.Lock()
	t.attached++
	t.mu.Unlock()
	return &runLink{h: h, t: t, store: store}
}

// options sets o's CommitStep and CommitEnd to the link's (l may be nil).
func (l *runLink) options(o kernel.RunOptions) kernel.RunOptions {
	if l != nil {
		o.CommitStep, o.CommitEnd = l.commitStep, l.commitEnd
	}
	return o
}

// commitStep is the run's kernel.RunOptions.CommitStep.
func (l *runLink) commitStep(ctx context.Context, id string, step kernel.Step) error {
	if id != l.t.id {
		return l.store.Commit(ctx, id, step)
	}
	return l.h.commitStep(ctx, l.t, l.store, step)
}

// storedAhead reports whether e is the next of the events commitEnd
// stored, which the kernel now emits (and takes it off the list).
func (l *runLink) storedAhead(e kernel.Event) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ahead) == 0 || l.ahead[0] != e.Type() {
		return false
	}
	l.ahead = l.ahead[1:]
	return true
}

// commitEnd is the run's kernel.RunOptions.CommitEnd: the run's last
// step, with t's pending events and then the events that end the run,
// in one write (kernel.StepEventCommitter), published once it returns. A
// client waiting for run.completed waits for that one sync. When the
// commit fails, nothing of it is stored: the pending events go back to
// the front of the queue, and the end events are dropped (the kernel
// emits a RunFailed instead). Without linger (the events are stored as
// they come), or when the pending events cannot all go with the step, it
// is commitStep, and the end events are stored after, on their own.
// Why: RATIONALE.md, "A run's end rides its last step (issue 45)".
func (l *runLink) commitEnd(ctx context.Context, id string, step kernel.Step, events []kernel.Event) error {
	h, t := l.h, l.t
	if id != t.id || h.linger <= 0 || step.Fence != l.fence {
		return l.commitStep(ctx, id, step)
	}
	end := make([]fencedEvent, 0, len(events))
	for _, e := range events {
		if ev, ok := h.encode(t, l.fence, e); ok {
			end = append(end, ev)
		}
	}
	t.mu.Lock()
	for t.flushing {
		t.idle.Wait()
	}
	n := len(t.pending)
	if n+len(end) > maxAttach || slices.ContainsFunc(t.pending, func(p fencedEvent) bool { return p.fence != step.Fence }) || n+len(end) == 0 {
		t.mu.Unlock()
		return h.commitStep(ctx, t, l.store, step)
	}
	fenced := append(t.pending[:n:n], end...)
	t.pending = nil
	err := h.ride(ctx, t, step, fenced, n)
	t.mu.Unlock()
	if err != nil {
		return err
	}
	types := make([]string, len(events))
	for i, e := range events {
		types[i] = e.Type()
	}
	l.mu.Lock()
	l.ahead = types
	l.mu.Unlock()
	yieldToStreams(t)
	return nil
}

// yieldToStreams lets the streams that t's last publication woke (the
// run's end) write it before the caller goes on: a woken stream waits
// on this processor until the caller blocks, and what follows a run's
// end (its record, the inbox, a follow-up) is not what its client waits
// for. Why: RATIONALE.md, "A run through kernel serve, fourth round
// (issue 45)".
func yieldToStreams(t *topic) {
	t.mu.Lock()
	n := len(t.subs)
	t.mu.Unlock()
	if n > 0 {
		runtime.Gosched()
	}
}

// endsRun reports whether batch holds the event that ends a run.
func endsRun(batch []kernel.StoredEvent) bool {
	return slices.ContainsFunc(batch, func(e kernel.StoredEvent) bool {
		return e.Type == runCompletedType || e.Type == runFailedType
	})
}

var (
	runCompletedType = kernel.RunCompleted{}.Type()
	runFailedType    = kernel.RunFailed{}.Type()
)

// detach ends what attach began; the events left pending are stored at
// once.
func (h *hub) detach(t *topic) {
	t.mu.Lock()
	t.attached--
	t.startLocked()
	t.mu.Unlock()
}

// commitStep commits step with t's pending events of the step's fence
// (kernel.StepEventCommitter), once the batch being stored, if any, is:
// the events keep their order. It publishes them once the commit returns.
// When the commit fails, nothing of it is stored: the events go back to
// the front of the queue and are stored on their own, and the step's
// error is the run's.
func (h *hub) commitStep(ctx context.Context, t *topic, store kernel.Store, step kernel.Step) error {
	t.mu.Lock()
	for t.flushing {
		t.idle.Wait()
	}
	n := 0
	for n < len(t.pending) && n < maxAttach && t.pending[n].fence == step.Fence {
		n++
	}
	if n == 0 {
		t.mu.Unlock()
		return store.Commit(ctx, t.id, step)
	}
	fenced := t.pending[:n:n]
	t.pending = t.pending[n:]
	defer t.mu.Unlock()
	return h.ride(ctx, t, step, fenced, n)
}

// ride commits step with fenced, taken off t's queue, and publishes them
// once the commit returns. When it fails, nothing of it is stored: the
// first n of fenced (those that were pending) go back to the front of the
// queue, to be stored on their own. The caller holds t.mu, no writer
// runs, and it is held again when ride returns.
func (h *hub) ride(ctx context.Context, t *topic, step kernel.Step, fenced []fencedEvent, n int) error {
	t.flushing = true
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.mu.Unlock()
	batch := make([]kernel.StoredEvent, len(fenced))
	for i := range fenced {
		batch[i] = fenced[i].ev
	}
	first, err := h.steps.CommitWithEvents(ctx, t.id, step, batch)
	if f := beforePublish.Load(); f != nil && err == nil {
		(*f)(t.id, first, batch)
	}
	t.mu.Lock()
	t.flushing = false
	if err != nil {
		t.pending = append(fenced[:n:n], t.pending...)
		t.startLocked()
		t.idle.Broadcast()
		return err
	}
	t.publishLocked(batch, first)
	if len(t.pending) > 0 {
		t.startLocked()
	}
	return nil
}

// beforePublish, when set (by tests), is called between a step's commit
// with events and their publication.
var beforePublish atomic.Pointer[func(id string, first uint64, events []kernel.StoredEvent)]

// lingerOverride, when set (by tests), replaces defaultLinger in new hubs.
var lingerOverride atomic.Pointer[time.Duration]

// flush stores the topic's pending events batch by batch until none is
// left, publishing each batch once it is stored. Its owner is the topic:
// wait returns only after it ends.
func (h *hub) flush(t *topic) {
	for {
		t.mu.Lock()
		pending := t.pending
		t.pending = nil
		if len(pending) == 0 {
			t.flushing = false
			t.idle.Broadcast()
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		// One append per run of events with the same fence (a topic's
		// runs follow one another, so nearly always one).
		for len(pending) > 0 {
			n := 1
			for n < len(pending) && pending[n].fence == pending[0].fence {
				n++
			}
			h.store(t, pending[:n])
			pending = pending[n:]
		}
	}
}

// store appends one batch of events with one fence and publishes it.
func (h *hub) store(t *topic, fenced []fencedEvent) {
	batch := make([]kernel.StoredEvent, len(fenced))
	for i := range fenced {
		batch[i] = fenced[i].ev
	}
	first, err := h.log.AppendEvents(context.Background(), t.id, fenced[0].fence, batch)
	t.mu.Lock()
	if err == nil && endsRun(batch) {
		defer yieldToStreams(t) // after the unlock below
	}
	defer t.mu.Unlock()
	if err != nil {
		t.failed += len(batch)
		if errors.Is(err, kernel.ErrLeaseLost) {
			h.warn("session %s: %d events of a run that lost the session's lease were not stored (the session is another replica's)", t.id, len(batch))
		} else {
			h.warn("session %s: %d events not stored (streams will not show them): %v", t.id, len(batch), err)
		}
		return
	}
	t.publishLocked(batch, first)
}

// publishLocked records batch, stored from seq first on, as the topic's
// recent events and wakes its streams (the caller holds t.mu).
func (t *topic) publishLocked(batch []kernel.StoredEvent, first uint64) {
	for i := range batch {
		batch[i].Seq = first + uint64(i)
	}
	t.head = max(t.head, batch[len(batch)-1].Seq)
	if sp := t.runner; sp != nil {
		sp.first.CompareAndSwap(0, first)
		sp.last.Store(batch[len(batch)-1].Seq)
	}
	if n := len(t.recent); n > 0 && t.recent[n-1].Seq+1 != first {
		// Another writer's events came between (a replica's, on a
		// shared store): recent stays contiguous, the rest is read
		// from the store.
		t.recent = nil
	}
	t.recent = append(t.recent, batch...)
	if n := len(t.recent); n > recentCap {
		t.recent = append(t.recent[:0:0], t.recent[n-recentCap:]...)
	}
	t.wake()
	t.idle.Broadcast()
}

// wait returns once every event added so far is stored (or refused).
func (t *topic) wait() {
	t.mu.Lock()
	for t.flushing || len(t.pending) > 0 {
		t.startLocked()
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

// remote is told that session id's log holds events up to seq (a notice
// of another replica, or the poll): when that is news, the topic's
// recent events no longer cover the log's end, so its streams are woken
// to read the store.
func (h *hub) remote(id string, seq uint64) {
	h.mu.Lock()
	t := h.topics[id]
	h.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq <= t.head {
		return
	}
	t.head = seq
	if n := len(t.recent); n > 0 && t.recent[n-1].Seq < seq {
		t.recent = nil
	}
	t.wake()
}

// remoteAll wakes every stream and inbox watcher to look at the store
// again (notices may have been missed).
func (h *hub) remoteAll() {
	h.mu.Lock()
	topics := make([]*topic, 0, len(h.topics))
	for _, t := range h.topics {
		topics = append(topics, t)
	}
	owners := make([]string, 0, len(h.inbox))
	for o := range h.inbox {
		owners = append(owners, o)
	}
	h.mu.Unlock()
	for _, t := range topics {
		t.mu.Lock()
		t.recent = nil
		t.wake()
		t.mu.Unlock()
	}
	for _, o := range owners {
		h.touchInbox(o)
	}
}

// watched returns the sessions with a stream open.
func (h *hub) watched() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for id, t := range h.topics {
		t.mu.Lock()
		if len(t.subs) > 0 {
			ids = append(ids, id)
		}
		t.mu.Unlock()
	}
	return ids
}

// wake notifies the topic's streams without blocking (the caller holds
// t.mu).
func (t *topic) wake() {
	for c := range t.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
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
