package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

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
// limit, errBusy when the session has a run, 503 when draining.
func (m *runManager) start(sid, owner string, k *Key, kind string, fn runFunc) (*runRec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		return nil, errorf(http.StatusServiceUnavailable, "draining", "the server is shutting down")
	}
	if cur := m.active[sid]; cur != nil {
		return nil, errBusy{cur.snapshot()}
	}
	if m.total >= m.s.lim.MaxRuns {
		e := errorf(http.StatusTooManyRequests, "too_many_runs", "the server runs %d runs, its limit: retry later", m.total)
		e.retryAfter = 2
		return nil, e
	}
	if m.perKey[k.ID] >= m.s.lim.MaxRunsPerKey {
		e := errorf(http.StatusTooManyRequests, "too_many_runs", "key %q runs %d runs, its limit: retry later", k.Name, m.perKey[k.ID])
		e.retryAfter = 2
		return nil, e
	}
	ctx, cancel := context.WithCancel(m.base)
	rec := &runRec{ID: "run_" + kernel.NewID(), SessionID: sid, Kind: kind, Status: runRunning, Principal: k.Name,
		Created: time.Now().UTC(), owner: owner, keyID: k.ID, cancel: cancel, done: make(chan struct{})}
	m.active[sid] = rec
	m.byID[rec.ID] = rec
	m.total++
	m.perKey[k.ID]++
	m.wg.Add(1)
	go m.run(ctx, rec, k, fn)
	return rec, nil
}

// run runs fn, then the session's queued follow-ups, each as a run of its
// own, and releases the session.
func (m *runManager) run(ctx context.Context, rec *runRec, k *Key, fn runFunc) {
	defer m.wg.Done()
	t := m.s.hub.acquire(rec.SessionID)
	defer m.s.hub.release(t)
	for rec != nil {
		kr := m.s.cfg.Kernel.With(kernel.RunOptions{Principal: k.Name, OnEvent: m.s.hub.sink(t, rec.owner), Interrupt: m.interrupt})
		res, err := fn(ctx, kr)
		t.wait() // the run's events are stored before it is reported ended
		rec, ctx, fn = m.finish(rec, res, err)
	}
}

// finish records the end of rec. When the session has a follow-up queued
// (and the server is not draining) it returns the run to start in rec's
// place, keeping the session's slot; else it frees the slot.
func (m *runManager) finish(rec *runRec, res *kernel.RunResult, err error) (*runRec, context.Context, runFunc) {
	m.mu.Lock()
	rec.Ended = time.Now().UTC()
	switch {
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
	close(rec.done)
	h := append(m.history[rec.SessionID], rec)
	if len(h) > historyCap {
		delete(m.byID, h[0].ID)
		h = h[1:]
	}
	m.history[rec.SessionID] = h
	stopping := m.stopping
	m.mu.Unlock()

	var fu *queue.Entry
	if !stopping && err == nil && res != nil && res.StopReason != kernel.StopAwaitingApproval && res.StopReason != kernel.StopInterrupted {
		var qerr error
		if fu, qerr = m.s.cfg.Queue.TakeFollowUp(rec.SessionID); qerr != nil {
			m.s.logError("session %s: take follow-up: %v", rec.SessionID, qerr)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fu != nil && !m.stopping {
		ctx, cancel := context.WithCancel(m.base)
		next := &runRec{ID: "run_" + kernel.NewID(), SessionID: rec.SessionID, Kind: kindFollowUp, Status: runRunning,
			Principal: rec.Principal, Created: time.Now().UTC(), owner: rec.owner, keyID: rec.keyID, cancel: cancel, done: make(chan struct{})}
		m.active[rec.SessionID] = next
		m.byID[next.ID] = next
		text := fu.Text
		return next, ctx, func(ctx context.Context, k *kernel.Kernel) (*kernel.RunResult, error) {
			return k.Run(ctx, next.SessionID, text)
		}
	}
	if fu != nil { // draining: the follow-up waits in the queue for the next server
		if _, err := m.s.cfg.Queue.Add(rec.SessionID, fu.Text, queue.FollowUp); err != nil {
			m.s.logError("session %s: requeue follow-up: %v", rec.SessionID, err)
		}
	}
	delete(m.active, rec.SessionID)
	m.total--
	m.perKey[rec.keyID]--
	if m.perKey[rec.keyID] == 0 {
		delete(m.perKey, rec.keyID)
	}
	return nil, nil, nil
}

// get returns a run by id.
func (m *runManager) get(id string) (runRec, bool) { return m.find(m.byID, id) }

// activeRun returns the session's run in flight, if any.
func (m *runManager) activeRun(sid string) (runRec, bool) { return m.find(m.active, sid) }

func (m *runManager) find(in map[string]*runRec, key string) (runRec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := in[key]
	if !ok {
		return runRec{}, false
	}
	return r.snapshot(), true
}

// list returns the session's runs, oldest first, the active one last.
func (m *runManager) list(sid string) []runRec {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]runRec, 0, len(m.history[sid])+1)
	for _, r := range m.history[sid] {
		out = append(out, r.snapshot())
	}
	if r := m.active[sid]; r != nil {
		out = append(out, r.snapshot())
	}
	return out
}

// snapshot copies the exported fields (the caller holds m.mu).
func (r *runRec) snapshot() runRec {
	return runRec{ID: r.ID, SessionID: r.SessionID, Kind: r.Kind, Status: r.Status, StopReason: r.StopReason, Output: r.Output,
		Error: r.Error, Principal: r.Principal, Created: r.Created, Ended: r.Ended, Turns: r.Turns, Usage: r.Usage, CostUSD: r.CostUSD, owner: r.owner}
}

// cancelRun cancels the session's run id; a run that ended is a conflict.
func (m *runManager) cancelRun(id string) (runRec, error) {
	m.mu.Lock()
	r, ok := m.byID[id]
	if !ok {
		m.mu.Unlock()
		return runRec{}, notFound("run", id)
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
		_, err := m.start(meta.ID, meta.Labels[labelOwner], k, kindResume, func(ctx context.Context, k *kernel.Kernel) (*kernel.RunResult, error) {
			return k.Continue(ctx, meta.ID)
		})
		var busy errBusy
		if err != nil && !errors.As(err, &busy) {
			m.s.logError("auto-resume session %s: %v", meta.ID, err)
		}
	}
	return nil
}
