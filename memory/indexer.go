package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// OwnerLabel is the session label that names a session's owner: kernel
// serve sets it to the API key's owner.
const OwnerLabel = "serve.owner"

// IndexerConfig configures an Indexer. The zero value of each field but
// Index and Store means its default.
type IndexerConfig struct {
	Index Index
	// Store is the session store the indexer catches up from: after a
	// restart, and whenever a step was not handed to it (a full queue).
	Store kernel.Store
	// Exclude, when set, keeps a chunk out of the index (a policy rule:
	// "tool results of read_file under secrets/").
	Exclude func(c *Chunk) bool
	// ExcludeCall, when set, also decides on each chunk of a tool result,
	// given the call it answers (memory.exclude's path globs read its
	// arguments). A step whose results answer calls of an earlier step
	// goes to catch-up, which sees the whole session; call is nil only for
	// a result whose call is not in the session at all.
	ExcludeCall func(c *Chunk, call *kernel.ToolCall) bool
	// Embedder, when set, computes the vectors of indexed chunks, in
	// batches of EmbedBatch (default 32), off the loop: chunks are
	// searchable by full text at once and by vector once embedded.
	Embedder   Embedder
	EmbedBatch int
	// Queue is how many committed steps wait for the indexer before a
	// step is left to catch-up (default 1024).
	Queue int
	// Report gets each fault once, when it starts (an index that refuses
	// writes), and once when it ends; nil discards them.
	Report func(msg string)
}

// Indexer indexes committed steps, off the loop: the run hands each
// step to it (Observe) and moves on; one goroutine (Run) chunks the
// messages and writes them to the index in batches, retrying with
// backoff when the index fails. A step it could not take (the queue is
// full, the index failed) is not lost: the session's mark stays behind
// its LastSeq, and CatchUp reads the missing messages from the store. It
// is safe for concurrent use.
type Indexer struct {
	cfg    IndexerConfig
	q      chan job
	dirty  sync.Map // session id → true: a step was dropped, catch up
	behind atomic.Int64
	faulty atomic.Bool
	// embedFaulty is the embeddings fault state (reported once).
	embedFaulty atomic.Bool
	wake        chan struct{} // new chunks to embed
	// Indexed counts the messages written to the index (tests, status).
	indexed atomic.Int64
	// embedFails counts, per chunk ID, the rounds in which the chunk
	// could not be embedded while others could; skipped holds the chunks
	// that reached MaxEmbedFailures: they stay searchable by full text
	// and are left out of the vector backlog until the process restarts.
	// Both are used by the embedder's goroutine alone, guarded by embedMu
	// for EmbedSkipped.
	embedMu    sync.Mutex
	embedFails map[string]int
	skipped    map[string]bool
}

// MaxEmbedFailures is how many rounds a chunk the embeddings server
// refuses (while it embeds the others) is tried before the embedder skips
// it, so that one text it cannot embed never holds up the vector backlog
// behind it.
const MaxEmbedFailures = 3

// EmbedSkipped returns the IDs of the chunks the embedder gave up on
// (MaxEmbedFailures), sorted.
func (ix *Indexer) EmbedSkipped() []string {
	ix.embedMu.Lock()
	defer ix.embedMu.Unlock()
	out := make([]string, 0, len(ix.skipped))
	for id := range ix.skipped {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

type job struct {
	sid   string
	meta  kernel.SessionMeta
	msgs  []kernel.Message
	flush chan struct{} // a Flush marker, no step
}

// NewIndexer returns an indexer; start it with Run.
func NewIndexer(cfg IndexerConfig) *Indexer {
	if cfg.Queue <= 0 {
		cfg.Queue = 1024
	}
	if cfg.EmbedBatch <= 0 {
		cfg.EmbedBatch = 32
	}
	return &Indexer{cfg: cfg, q: make(chan job, cfg.Queue), wake: make(chan struct{}, 1)}
}

// Observe wraps next (telemetry's, or nil) with the indexer's observer:
// every committed step of every run is handed to the indexer. Set
// kernel.Config.Observe to it.
func (ix *Indexer) Observe(next kernel.ObserveFunc) kernel.ObserveFunc {
	return func(ctx context.Context, info kernel.RunInfo) (context.Context, kernel.RunObserver) {
		var inner kernel.RunObserver
		if next != nil {
			ctx, inner = next(ctx, info)
		}
		return ctx, &observer{ix: ix, inner: inner}
	}
}

type observer struct {
	ix    *Indexer
	inner kernel.RunObserver
}

func (o *observer) Event(e kernel.Event) {
	if o.inner != nil {
		o.inner.Event(e)
	}
}

func (o *observer) Committed(d time.Duration, err error) {
	if o.inner != nil {
		o.inner.Committed(d, err)
	}
}

func (o *observer) End(res *kernel.RunResult, err error) {
	if o.inner != nil {
		o.inner.End(res, err)
	}
}

// StepCommitted hands the step to the indexer without blocking.
func (o *observer) StepCommitted(sid string, st *kernel.Step) {
	if so, ok := o.inner.(kernel.StepObserver); ok {
		so.StepCommitted(sid, st)
	}
	o.ix.Offer(sid, st.Meta, st.Messages)
}

var _ kernel.StepObserver = (*observer)(nil)

// Offer hands committed messages to the indexer without blocking; when
// the queue is full the session is marked for catch-up instead.
func (ix *Indexer) Offer(sid string, meta kernel.SessionMeta, msgs []kernel.Message) {
	if len(msgs) == 0 {
		return
	}
	select {
	case ix.q <- job{sid: sid, meta: meta, msgs: msgs}:
	default:
		ix.dirty.Store(sid, true)
		ix.behind.Add(1)
	}
}

// Flush waits until every step offered before it is indexed (or ctx ends).
func (ix *Indexer) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case ix.q <- job{flush: done}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run indexes offered steps until ctx ends. It first catches up with the
// store (CatchUp) and does so again after a failure and whenever a step
// was dropped.
func (ix *Indexer) Run(ctx context.Context) error {
	if ix.cfg.Embedder != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() { defer close(done); ix.embedLoop(ctx) }()
	}
	if err := ix.CatchUp(ctx); err != nil && ctx.Err() == nil {
		ix.fault(fmt.Sprintf("memory: catching up with the store: %v", err))
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	sweep := time.NewTicker(SweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case j := <-ix.q:
			if j.flush != nil {
				ix.catchUpDirty(ctx)
				close(j.flush)
				continue
			}
			batch := []job{j}
		more:
			for len(batch) < 64 {
				select {
				case j2 := <-ix.q:
					if j2.flush != nil {
						ix.write(ctx, batch)
						batch = nil
						ix.catchUpDirty(ctx)
						close(j2.flush)
						break more
					}
					batch = append(batch, j2)
				default:
					break more
				}
			}
			if len(batch) > 0 {
				ix.write(ctx, batch)
			}
		case <-tick.C:
			ix.catchUpDirty(ctx)
		case <-sweep.C:
			if _, err := ix.Sweep(ctx); err != nil && ctx.Err() == nil {
				ix.fault(fmt.Sprintf("memory: sweeping the chunks of deleted sessions: %v", err))
			}
		}
	}
}

// write indexes a batch of steps; a step that does not continue its
// session's mark (an earlier one was dropped) sends the session to
// catch-up instead.
func (ix *Indexer) write(ctx context.Context, jobs []job) {
	var b Batch
	b.Marks = map[string]uint64{}
	for _, j := range jobs {
		mark, ok := b.Marks[j.sid]
		if !ok {
			m, err := ix.cfg.Index.Mark(ctx, j.sid)
			if err != nil {
				ix.dirty.Store(j.sid, true)
				continue
			}
			mark = m
		}
		if j.msgs[0].Seq != mark+1 {
			if j.msgs[len(j.msgs)-1].Seq > mark {
				ix.dirty.Store(j.sid, true)
			}
			continue
		}
		calls := callsOf(j.msgs)
		if ix.cfg.ExcludeCall != nil && !answered(j.msgs, calls) {
			ix.dirty.Store(j.sid, true) // catch-up sees the calls
			continue
		}
		b.Chunks = append(b.Chunks, ix.chunks(j.sid, &j.meta, j.msgs, calls)...)
		b.Marks[j.sid] = j.msgs[len(j.msgs)-1].Seq
	}
	if err := ix.add(ctx, b); err != nil {
		for sid := range b.Marks {
			ix.dirty.Store(sid, true)
		}
		return
	}
	for _, j := range jobs {
		ix.indexed.Add(int64(len(j.msgs)))
	}
	ix.poke()
}

func (ix *Indexer) poke() {
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// embedLoop embeds the chunks that have no vector yet, a batch at a time,
// until ctx ends. A failing server is reported once and retried with a
// growing pause (up to a minute); the chunks stay searchable by text.
func (ix *Indexer) embedLoop(ctx context.Context) {
	pause := time.Duration(0)
	for {
		if pause > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
		}
		n, err := ix.EmbedPending(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			if ix.embedFaulty.CompareAndSwap(false, true) && ix.cfg.Report != nil {
				ix.cfg.Report(fmt.Sprintf("memory: embeddings failed (%v); chunks are searchable by full text and embedded when the server answers", err))
			}
			pause = min(max(2*pause, 500*time.Millisecond), time.Minute)
		case n > 0:
			pause = 0
		default:
			select {
			case <-ctx.Done():
				return
			case <-ix.wake:
			case <-time.After(30 * time.Second):
			}
		}
	}
}

// EmbedPending embeds one batch of chunks without a vector and returns
// how many it embedded. When the server refuses the batch, each chunk is
// tried alone: the ones it embeds are written, and a chunk it refuses
// while it embeds others counts a failure; after MaxEmbedFailures the
// chunk is skipped (reported once) and the backlog moves past it. When it
// refuses every chunk, the server is at fault, not the texts: nothing is
// counted and the error is returned.
func (ix *Indexer) EmbedPending(ctx context.Context) (int, error) {
	ix.embedMu.Lock()
	nskip := len(ix.skipped)
	ix.embedMu.Unlock()
	all, err := ix.cfg.Index.Pending(ctx, ix.cfg.EmbedBatch+nskip)
	if err != nil || len(all) == 0 {
		return 0, err
	}
	cs := all[:0:0]
	ix.embedMu.Lock()
	for _, c := range all {
		if !ix.skipped[c.ID] && len(cs) < ix.cfg.EmbedBatch {
			cs = append(cs, c)
		}
	}
	ix.embedMu.Unlock()
	if len(cs) == 0 {
		return 0, nil
	}
	err = ix.embed(ctx, cs)
	if err != nil && len(cs) > 1 && ctx.Err() == nil {
		var good, bad []Chunk
		for _, c := range cs {
			if e := ix.embed(ctx, []Chunk{c}); e == nil {
				good = append(good, c)
			} else {
				if ctx.Err() != nil {
					return 0, ctx.Err()
				}
				bad = append(bad, c)
			}
		}
		if len(good) == 0 {
			return 0, err
		}
		ix.embedFailed(bad, err)
		cs, err = good, nil
	}
	if err != nil {
		return 0, err
	}
	if err := ix.cfg.Index.Add(ctx, Batch{Chunks: cs}); err != nil {
		return 0, err
	}
	if ix.embedFaulty.CompareAndSwap(true, false) && ix.cfg.Report != nil {
		ix.cfg.Report("memory: embeddings work again")
	}
	return len(cs), nil
}

// embed sets the vectors of cs from one request.
func (ix *Indexer) embed(ctx context.Context, cs []Chunk) error {
	texts := make([]string, len(cs))
	for i := range cs {
		texts[i] = cs[i].Text
	}
	vs, err := ix.cfg.Embedder.Embed(ctx, texts)
	if err == nil && len(vs) != len(cs) {
		err = fmt.Errorf("%d vectors for %d texts", len(vs), len(cs))
	}
	if err != nil {
		return err
	}
	for i := range cs {
		cs[i].Vector = vs[i]
	}
	return nil
}

// embedFailed counts a failed round for each of bad, chunks the server
// refused while it embedded others, and skips those that reached
// MaxEmbedFailures.
func (ix *Indexer) embedFailed(bad []Chunk, err error) {
	ix.embedMu.Lock()
	defer ix.embedMu.Unlock()
	if ix.embedFails == nil {
		ix.embedFails, ix.skipped = map[string]int{}, map[string]bool{}
	}
	for _, c := range bad {
		ix.embedFails[c.ID]++
		if ix.embedFails[c.ID] < MaxEmbedFailures {
			continue
		}
		delete(ix.embedFails, c.ID)
		ix.skipped[c.ID] = true
		if ix.cfg.Report != nil {
			ix.cfg.Report(fmt.Sprintf("memory: chunk %s could not be embedded %d times (%v); it stays searchable by full text, and the vector backlog goes on without it", c.ID, MaxEmbedFailures, err))
		}
	}
}

// add writes b, retrying with backoff while ctx lasts (at most 5 tries:
// then the sessions wait for catch-up).
func (ix *Indexer) add(ctx context.Context, b Batch) error {
	if len(b.Chunks) == 0 && len(b.Marks) == 0 {
		return nil
	}
	var err error
	delay := 50 * time.Millisecond
	for try := 0; try < 5; try++ {
		if err = ix.cfg.Index.Add(ctx, b); err == nil {
			ix.recovered()
			return nil
		}
		if errors.Is(err, ErrDimension) || errors.Is(err, ErrBadVector) || errors.Is(err, ErrClosed) {
			break // not transient
		}
		ix.fault(fmt.Sprintf("memory: the index refused a write (%v); retrying", err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay *= 2
	}
	ix.fault(fmt.Sprintf("memory: the index refused a write (%v); the sessions are caught up later", err))
	return err
}

func (ix *Indexer) fault(msg string) {
	if ix.faulty.CompareAndSwap(false, true) && ix.cfg.Report != nil {
		ix.cfg.Report(msg)
	}
}

func (ix *Indexer) recovered() {
	if ix.faulty.CompareAndSwap(true, false) && ix.cfg.Report != nil {
		ix.cfg.Report("memory: the index accepts writes again")
	}
}

// chunks cuts the indexable messages of a step into chunks: user prompts,
// assistant answers and tool results, as stored; system messages (hook
// context, memory's own injections, summaries), failed turns and empty
// texts are left out, and so is whatever Exclude refuses.
func (ix *Indexer) chunks(sid string, meta *kernel.SessionMeta, msgs []kernel.Message, calls map[string]*kernel.ToolCall) []Chunk {
	var out []Chunk
	owner := meta.Labels[OwnerLabel]
	ws := ""
	if meta.Context != nil {
		ws = meta.Context.Workspace
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Failed != "" || m.Content == "" {
			continue
		}
		switch m.Role {
		case kernel.RoleUser, kernel.RoleAssistant, kernel.RoleTool:
		default:
			continue
		}
		for p, text := range Split(m.Content, 0) {
			c := Chunk{ID: ChunkID(sid, m.Seq, p), SessionID: sid, Owner: owner, Workspace: ws, Seq: m.Seq, Part: p,
				Role: string(m.Role), Tool: m.ToolName, Time: m.Time, Text: text}
			if ix.cfg.Exclude != nil && ix.cfg.Exclude(&c) {
				continue
			}
			if ix.cfg.ExcludeCall != nil && m.Role == kernel.RoleTool && ix.cfg.ExcludeCall(&c, calls[m.ToolCallID]) {
				continue
			}
			out = append(out, c)
		}
	}
	return out
}

func (ix *Indexer) catchUpDirty(ctx context.Context) {
	ix.dirty.Range(func(k, _ any) bool {
		sid := k.(string)
		ix.dirty.Delete(sid)
		if err := ix.catchUpSession(ctx, sid); err != nil && ctx.Err() == nil {
			ix.dirty.Store(sid, true)
		}
		return ctx.Err() == nil
	})
}

// CatchUp indexes what the store holds beyond each session's mark, and
// removes from the index the sessions the store no longer has (when the
// index can list its marks: Marker).
func (ix *Indexer) CatchUp(ctx context.Context) error {
	metas, err := ix.cfg.Store.List(ctx)
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(metas))
	var first error
	for _, m := range metas {
		have[m.ID] = true
		mark, err := ix.cfg.Index.Mark(ctx, m.ID)
		if err != nil {
			return err
		}
		if mark == m.LastSeq {
			continue
		}
		if err := ix.catchUpSession(ctx, m.ID); err != nil && first == nil {
			first = err
		}
	}
	if _, err := ix.Sweep(ctx); err != nil && first == nil {
		first = err
	}
	ix.behind.Store(0)
	return first
}

// Marker is an optional capability of an Index: every session's mark,
// and 0 for a session that has chunks but no mark. With it the indexer
// removes the chunks of sessions the store no longer has (Sweep); without
// it they stay until `kernel memory reindex`.
type Marker interface {
	Marks(ctx context.Context) (map[string]uint64, error)
}

// SweepEvery is how often Run sweeps the index for sessions the store no
// longer has (Sweep).
const SweepEvery = time.Minute

// Sweep removes from the index every session the store no longer has,
// and returns how many it removed. It is how a deleted session's chunks
// never survive, whatever raced with the delete: a step indexed after the
// session was deleted, or a vector computed for a chunk of it and written
// back (a store deleting a session's chunks with it, as PostgreSQL's
// does, cannot see writes that come later). The index's sessions are read
// before the store's, so a session created meanwhile is never taken for
// a deleted one. An index that is not a Marker is not swept.
func (ix *Indexer) Sweep(ctx context.Context) (int, error) {
	lm, ok := ix.cfg.Index.(Marker)
	if !ok {
		return 0, nil
	}
	marks, err := lm.Marks(ctx)
	if err != nil || len(marks) == 0 {
		return 0, err
	}
	metas, err := ix.cfg.Store.List(ctx)
	if err != nil {
		return 0, err
	}
	have := make(map[string]bool, len(metas))
	for _, m := range metas {
		have[m.ID] = true
	}
	n := 0
	for sid := range marks {
		if have[sid] {
			continue
		}
		if err := ix.cfg.Index.DeleteSession(ctx, sid); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// catchUpSession indexes the stored messages of sid beyond its mark. A
// mark beyond the stored history (the store lost steps, or the session
// was replaced) drops the session's chunks and indexes it again.
func (ix *Indexer) catchUpSession(ctx context.Context, sid string) error {
	sess, err := ix.cfg.Store.Load(ctx, sid)
	if errors.Is(err, kernel.ErrSessionNotFound) {
		return ix.cfg.Index.DeleteSession(ctx, sid)
	}
	if err != nil {
		return err
	}
	mark, err := ix.cfg.Index.Mark(ctx, sid)
	if err != nil {
		return err
	}
	if mark > sess.Meta.LastSeq {
		if err := ix.cfg.Index.DeleteSession(ctx, sid); err != nil {
			return err
		}
		mark = 0
	}
	var todo []kernel.Message
	for _, m := range sess.Messages {
		if m.Seq > mark {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	calls := callsOf(sess.Messages)
	// In slices of 256 messages, so a long session is not one huge batch.
	for len(todo) > 0 {
		n := min(len(todo), 256)
		b := Batch{Chunks: ix.chunks(sid, &sess.Meta, todo[:n], calls), Marks: map[string]uint64{sid: todo[n-1].Seq}}
		if err := ix.add(ctx, b); err != nil {
			return err
		}
		ix.indexed.Add(int64(n))
		todo = todo[n:]
	}
	return nil
}

// Backlog counts steps waiting in the queue and steps dropped for
// catch-up since the last full catch-up.
func (ix *Indexer) Backlog() int64 { return int64(len(ix.q)) + ix.behind.Load() }

// Indexed counts the messages the indexer has written.
func (ix *Indexer) Indexed() int64 { return ix.indexed.Load() }

// callsOf maps the ID of each tool call msgs hold to the call.
func callsOf(msgs []kernel.Message) map[string]*kernel.ToolCall {
	calls := map[string]*kernel.ToolCall{}
	for i := range msgs {
		for j := range msgs[i].ToolCalls {
			c := &msgs[i].ToolCalls[j]
			calls[c.ID] = c
		}
	}
	return calls
}

// answered reports whether every tool result of msgs answers a call in
// calls.
func answered(msgs []kernel.Message, calls map[string]*kernel.ToolCall) bool {
	for i := range msgs {
		if msgs[i].Role == kernel.RoleTool && calls[msgs[i].ToolCallID] == nil {
			return false
		}
	}
	return true
}
