package serve

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/faults"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/queue"
)

// Run kinds: what started a run.
const (
	kindPrompt   = "prompt"
	kindFollowUp = "followup"
	kindApprove  = "approve"
	kindReject   = "reject"
	kindResume   = "resume"
)

// Run statuses.
const (
	runRunning   = "running"
	runCompleted = "completed" // ended for any reason but an error or a cancel
	runFailed    = "failed"
	runCancelled = "cancelled"
)

// runRec is one run as the API shows it.
type runRec struct {
	ID         string            `json:"id"`
	SessionID  string            `json:"session_id"`
	Kind       string            `json:"kind"`
	Status     string            `json:"status"`
	StopReason kernel.StopReason `json:"stop_reason,omitempty"`
	Output     string            `json:"output,omitempty"`
	Error      string            `json:"error,omitempty"`
	Principal  string            `json:"principal"`
	Created    time.Time         `json:"created"`
	Ended      time.Time         `json:"ended,omitzero"`
	Turns      int               `json:"turns"`
	Usage      kernel.Usage      `json:"usage"`
	CostUSD    float64           `json:"cost_usd"`

	owner  string
	keyID  string
	cancel context.CancelFunc
	done   chan struct{}
	// lease is the session's lease on a shared store (nil otherwise),
	// held by the run and the follow-ups it chains.
	lease *kernel.HeldLease
	// span is where the run's events are in the session's log.
	span *eventSpan
}

// runManager owns every run goroutine: it starts them within the limits,
// keeps one run per session, and waits for them at drain.
type runManager struct {
	s *Server

	mu       sync.Mutex
	active   map[string]*runRec   // by session id
	byID     map[string]*runRec   // recent runs, by run id
	history  map[string][]*runRec // by session id, oldest first, bounded
	perKey   map[string]int
	total    int
	stopping bool

	wg        sync.WaitGroup
	base      context.Context // cancelled when a drain gives up waiting
	cancel    context.CancelFunc
	interrupt chan struct{} // closed at drain: runs stop at a step boundary
}

// historyCap is how many finished runs per session stay visible.
const historyCap = 20

func newRunManager(s *Server) *runManager {
	ctx, cancel := context.WithCancel(context.Background())
	return &runManager{s: s, active: map[string]*runRec{}, byID: map[string]*runRec{}, history: map[string][]*runRec{},
		perKey: map[string]int{}, base: ctx, cancel: cancel, interrupt: make(chan struct{})}
}

// runFunc is the kernel call a run makes.
type runFunc func(ctx context.Context, k *kernel.Kernel) (*kernel.RunResult, error)

// errBusy is returned by start for a session that has a run.
type errBusy struct{ run runRec }

func (e errBusy) Error() string { return "session has a run in flight" }

// start starts fn as a run of session sid for key k, or fails: 429 at a
// limit, errBusy when the session has a run (here, or on another replica
// of a shared store), 503 when draining. On a shared store the run holds
// the session's lease (taken here, before answering) from its start to
// the end of its last follow-up.
func (m *runManager) start(ctx context.Context, sid, owner string, k *Key, kind string, fn runFunc) (runRec, error) {
	return m.startWith(ctx, sid, owner, k, kind, fn, nil)
}

// errNothingToRun is startWith's error when prepare found nothing to run.
var errNothingToRun = errors.New("nothing to run")

// startWith is start with prepare, called once the session is this
// server's (its lease held, on a shared store) and before the run starts:
// false (or an error) gives the session up and starts nothing. ctx bounds
// the start (taking the lease, prepare), not the run.
func (m *runManager) startWith(ctx context.Context, sid, owner string, k *Key, kind string, fn runFunc, prepare func(context.Context) (bool, error)) (runRec, error) {
	m.mu.Lock()
	if m.stopping {
		m.mu.Unlock()
		return runRec{}, errorf(codeDraining, "the server is shutting down")
	}
	if cur := m.active[sid]; cur != nil {
		m.mu.Unlock()
		return runRec{}, errBusy{cur.snapshot()}
	}
	if m.total >= m.s.lim.MaxRuns {
		m.mu.Unlock()
		e := errorf(codeTooManyRuns, "the server runs %d runs, its limit: retry later", m.total)
		e.retryAfter = 2
		return runRec{}, e
	}
	if m.perKey[k.ID] >= m.s.lim.MaxRunsPerKey {
		m.mu.Unlock()
		e := errorf(codeTooManyRuns, "key %q runs %d runs, its limit: retry later", k.Name, m.perKey[k.ID])
		e.retryAfter = 2
		return runRec{}, e
	}
	runCtx, cancel := context.WithCancel(m.base)
	rec := &runRec{ID: "run_" + kernel.NewID(), SessionID: sid, Kind: kind, Status: runRunning, Principal: k.Name,
		Created: time.Now().UTC(), owner: owner, keyID: k.ID, cancel: cancel, done: make(chan struct{}), span: &eventSpan{}}
	m.active[sid] = rec // the session's slot, held while the lease is taken
	m.byID[rec.ID] = rec
	m.total++
	m.perKey[k.ID]++
	m.mu.Unlock()
	err := m.s.replicas.claim(ctx, rec)
	if err == nil && prepare != nil {
		var ok bool
		if ok, err = prepare(ctx); err == nil && !ok {
			err = errNothingToRun
		}
		if err != nil {
			m.s.replicas.letGo(ctx, rec.lease)
		}
	}
	if err != nil {
		m.mu.Lock()
		delete(m.active, sid)
		delete(m.byID, rec.ID)
		m.release(k.ID)
		m.mu.Unlock()
		cancel()
		return runRec{}, err
	}
	m.mu.Lock()
	// What the 202 shows: the run as it starts; and what its stream
	// follows (runstream.go).
	started := rec.snapshot()
	started.done, started.span = rec.done, rec.span
	m.mu.Unlock()
	m.wg.Add(1)
	go m.run(runCtx, rec, k, fn)
	// The run starts now, on this processor, and the caller (the 202,
	// its access log line) goes on when a processor is free: else the
	// new goroutine waits until the caller blocks, after its response is
	// written. Why: RATIONALE.md, "A run through kernel serve, fourth
	// round (issue 45)".
	runtime.Gosched()
	return started, nil
}

// isStopping reports whether the server takes no more runs (draining).
func (m *runManager) isStopping() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopping
}

// release frees a run's place in the limits (the caller holds m.mu).
func (m *runManager) release(keyID string) {
	m.total--
	m.perKey[keyID]--
	if m.perKey[keyID] == 0 {
		delete(m.perKey, keyID)
	}
}

// run runs fn, then the session's queued follow-ups, each as a run of its
// own, and releases the session.
func (m *runManager) run(ctx context.Context, rec *runRec, k *Key, fn runFunc) {
	defer m.wg.Done()
	t := m.s.hub.acquire(rec.SessionID)
	defer m.s.hub.release(t)
	lease := rec.lease
	for rec != nil {
		t.follow(rec.span)                       // the session's events are the run's from here
		link := m.s.hub.attach(t, m.s.cfg.Store) // the run's steps store its events
		kr := m.s.sessionKernel(ctx, rec.SessionID).With(link.options(kernel.RunOptions{Principal: k.Name, OnEvent: m.s.hub.runSink(ctx, t, rec.owner, lease, link), Interrupt: m.interrupt, Lease: lease}))
		res, err := fn(ctx, kr)
		if link != nil {
			m.s.hub.detach(t)
		}
		t.wait() // the run's events are stored before it is reported ended
		t.unfollow(rec.span)
		rec, ctx, fn = m.finish(ctx, rec, res, err)
	}
}

// finish records the end of rec, which ran with runCtx. When the session
// has a follow-up queued (and the server is not draining) it returns the
// run to start in rec's place, keeping the session's slot; else it frees
// the slot.
func (m *runManager) finish(runCtx context.Context, rec *runRec, res *kernel.RunResult, err error) (*runRec, context.Context, runFunc) {
	// What is recorded of the end is recorded even when the run was
	// cancelled.
	ctx := context.WithoutCancel(runCtx)
	m.mu.Lock()
	rec.Ended = time.Now().UTC()
	switch {
	case errors.Is(err, kernel.ErrAlreadyDelivered):
		// The follow-up's prompt was stored by a process that stopped
		// before it was marked delivered: nothing ran.
		rec.Status = runCompleted
		err = nil
		rec.Output = ""
		rec.Error = "the follow-up was already in the session (stored before the server that took it stopped); nothing ran again"
	case res != nil && res.StopReason == kernel.StopCancelled:
		rec.Status = runCancelled
	case err != nil:
		rec.Status = runFailed
	default:
		rec.Status = runCompleted
	}
	if err != nil {
		rec.Error = m.s.cfg.Scrub(err.Error())
	}
	if res != nil {
		rec.StopReason, rec.Output, rec.Turns, rec.Usage, rec.CostUSD = res.StopReason, res.Output, res.Turns, res.Usage, res.CostUSD
	}
	rec.cancel()
	snap := rec.snapshot()
	stopping := m.stopping
	m.mu.Unlock()
	faults.At(faults.RunEnd, rec.SessionID)
	m.s.replicas.ended(ctx, snap) // before the waiters of done look it up
	m.mu.Lock()
	close(rec.done)
	h := append(m.history[rec.SessionID], rec)
	if len(h) > historyCap {
		delete(m.byID, h[0].ID)
		h = h[1:]
	}
	m.history[rec.SessionID] = h
	m.mu.Unlock()

	var fu *queue.Entry
	lost := rec.lease != nil && rec.lease.Err() != nil
	if !stopping && !lost && err == nil && res != nil && res.StopReason != kernel.StopAwaitingApproval && res.StopReason != kernel.StopInterrupted {
		var qerr error
		if fu, qerr = m.s.cfg.Queue.TakeFollowUp(ctx, rec.SessionID); qerr != nil {
			m.s.logError("session %s: take follow-up: %v", rec.SessionID, qerr)
		} else if fu != nil {
			faults.At(faults.FollowUpTaken, rec.SessionID)
		}
	}
	m.mu.Lock()
	if fu != nil && !m.stopping {
		nextCtx, cancel := context.WithCancel(m.base)
		next := &runRec{ID: "run_" + kernel.NewID(), SessionID: rec.SessionID, Kind: kindFollowUp, Status: runRunning,
			Principal: rec.Principal, Created: time.Now().UTC(), owner: rec.owner, keyID: rec.keyID, cancel: cancel, done: make(chan struct{}),
			lease: rec.lease, span: &eventSpan{}}
		m.active[rec.SessionID] = next
		m.byID[next.ID] = next
		m.mu.Unlock()
		m.s.replicas.started(ctx, next)
		m.mu.Lock()
		defer m.mu.Unlock()
		q := fu.Queued
		return next, nextCtx, func(ctx context.Context, k *kernel.Kernel) (*kernel.RunResult, error) {
			return k.RunQueued(ctx, next.SessionID, q)
		}
	}
	m.mu.Unlock()
	// Draining with a follow-up taken: it stays in the queue, taken and
	// not delivered, for the next server (or another replica) to take.
	m.s.replicas.letGo(ctx, rec.lease) // the session is free for any replica from here
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.active, rec.SessionID)
	m.release(rec.keyID)
	return nil, nil, nil
}

// get returns a run by id: one of this server's, or one another replica
// recorded.
func (m *runManager) get(ctx context.Context, id string) (runRec, bool) {
	if r, ok := m.find(m.byID, id); ok {
		return r, true
	}
	return m.s.replicas.get(ctx, id)
}

// activeRun returns the session's run in flight, here or on another
// replica, if any.
func (m *runManager) activeRun(ctx context.Context, sid string) (runRec, bool) {
	if r, ok := m.activeLocal(sid); ok {
		return r, true
	}
	return m.s.replicas.active(ctx, sid)
}

// activeLocal returns the session's run in flight on this server.
func (m *runManager) activeLocal(sid string) (runRec, bool) { return m.find(m.active, sid) }

func (m *runManager) find(in map[string]*runRec, key string) (runRec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := in[key]
	if !ok {
		return runRec{}, false
	}
	return r.snapshot(), true
}

// list returns the session's runs, oldest first, the active one last: on
// a shared store those of every replica.
func (m *runManager) list(ctx context.Context, sid string) []runRec {
	m.mu.Lock()
	local := make([]runRec, 0, len(m.history[sid])+1)
	for _, r := range m.history[sid] {
		local = append(local, r.snapshot())
	}
	if r := m.active[sid]; r != nil {
		local = append(local, r.snapshot())
	}
	m.mu.Unlock()
	all, ok := m.s.replicas.list(ctx, sid)
	if !ok {
		return local
	}
	// The board has every replica's; this server's own are fresher.
	mine := map[string]runRec{}
	for _, r := range local {
		mine[r.ID] = r
	}
	for i, r := range all {
		if l, ok := mine[r.ID]; ok {
			all[i] = l
			delete(mine, r.ID)
		}
	}
	for _, r := range local {
		if _, ok := mine[r.ID]; ok {
			all = append(all, r)
		}
	}
	if len(all) > historyCap+1 {
		all = all[len(all)-historyCap-1:]
	}
	return all
}

// snapshot copies the exported fields (the caller holds m.mu).
func (r *runRec) snapshot() runRec {
	return runRec{ID: r.ID, SessionID: r.SessionID, Kind: r.Kind, Status: r.Status, StopReason: r.StopReason, Output: r.Output,
		Error: r.Error, Principal: r.Principal, Created: r.Created, Ended: r.Ended, Turns: r.Turns, Usage: r.Usage, CostUSD: r.CostUSD, owner: r.owner}
}

// cancelRun cancels run id (here, or on the replica that runs it) and
// answers once it has stopped; a run that ended is a conflict.
func (m *runManager) cancelRun(ctx context.Context, id string) (runRec, error) {
	m.mu.Lock()
	r, ok := m.byID[id]
	if !ok {
		m.mu.Unlock()
		return m.s.replicas.cancelRemote(ctx, id)
	}
	if r.Status != runRunning {
		snap := r.snapshot()
		m.mu.Unlock()
		return snap, conflict(r.Status, "run %s has ended (%s): nothing to cancel", id, r.Status)
	}
	r.cancel()
	done := r.done
	m.mu.Unlock()
	<-done
	m.mu.Lock()
	defer m.mu.Unlock()
	return r.snapshot(), nil
}

// cancelLocal cancels run id if it runs here (a cancel request another
// replica recorded).
func (m *runManager) cancelLocal(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.byID[id]; ok && r.Status == runRunning {
		r.cancel()
	}
}

// drain stops taking runs, asks every run to stop at its next step
// boundary, and waits until deadline; runs still going then are
// cancelled (they record how far they got) and waited for.
func (m *runManager) drain(deadline time.Time) {
	m.interruptAll()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
	}
	m.s.logError("drain: runs did not reach a step boundary in time; cancelling them")
	m.cancel()
	<-done
}

// interruptAll stops taking runs and asks every run to stop at its next
// step boundary.
func (m *runManager) interruptAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.stopping {
		m.stopping = true
		close(m.interrupt)
	}
}

// stopAll cancels every run and waits for them.
func (m *runManager) stopAll() {
	m.interruptAll()
	m.cancel()
	m.wg.Wait()
}

// autoResume continues every session a previous process left running.
func (m *runManager) autoResume(ctx context.Context) error {
	metas, err := m.s.cfg.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("auto-resume: list sessions: %w", err)
	}
	for _, meta := range metas {
		if meta.Status != kernel.StatusRunning || meta.Labels[labelOwner] == "" {
			continue
		}
		// Each its own "key": the per-key limit is for clients.
		k := &Key{ID: "auto-resume:" + meta.ID, Name: meta.Labels[labelPrincipal]}
		if k.Name == "" {
			k.Name = "auto-resume"
		}
		_, err := m.start(ctx, meta.ID, meta.Labels[labelOwner], k, kindResume, func(ctx context.Context, k *kernel.Kernel) (*kernel.RunResult, error) {
			return k.Continue(ctx, meta.ID)
		})
		var busy errBusy
		if err != nil && !errors.As(err, &busy) {
			m.s.logError("auto-resume session %s: %v", meta.ID, err)
		}
	}
	return nil
}
