package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/replica"
)

// replicas is what a server does when it shares its store with other
// servers (replica.Shared, e.g. PostgreSQL): every run holds its
// session's lease, its record is on the store's board, steering goes
// through the store's queue, and notices (LISTEN/NOTIFY) with a polling
// fallback wake streams, inboxes and cancellations across replicas. On a
// store one process owns, st is nil and every method does nothing: the
// server keeps all of it in process, as before.
// Why: RATIONALE.md, "Replicas share records, not processes".
type replicas struct {
	s    *Server
	st   replica.Shared // nil: not shared
	name string
	ttl  time.Duration
	poll time.Duration

	mu sync.Mutex
	// waiting are the waiters for runs of other replicas to end (cancel),
	// by run id.
	waiting map[string][]chan struct{}
	// starting are sessions a sweep or a notice is starting a run for.
	starting map[string]bool
	// failing is set while the sweep's store calls fail (logged once).
	failing atomic.Bool

	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newReplicas(s *Server) *replicas {
	r := &replicas{s: s, waiting: map[string][]chan struct{}{}, starting: map[string]bool{}}
	st, ok := s.cfg.Store.(replica.Shared)
	if !ok {
		return r
	}
	r.st, r.name, r.ttl, r.poll = st, s.cfg.Replica, s.cfg.LeaseTTL, s.cfg.Poll
	if r.name == "" {
		host, _ := os.Hostname()
		r.name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), kernel.NewID()[:6])
	}
	if r.ttl <= 0 {
		r.ttl = 15 * time.Second
	}
	if r.poll <= 0 {
		r.poll = time.Second
	}
	return r
}

// shared reports whether the store is shared with other replicas.
func (r *replicas) shared() bool { return r.st != nil }

// claim takes rec's session for this replica: its lease (kept alive until
// letGo) and a running record on the board. A session another replica
// runs is errBusy with that run.
func (r *replicas) claim(ctx context.Context, rec *runRec) error {
	if r.st == nil {
		return nil
	}
	// A lease held with no run in flight is a run starting or ending on
	// another replica (its record and its lease change one after the
	// other): wait for one or the other, briefly.
	var lease *kernel.HeldLease
	var err error
	// A board that takes the lease and records the run in one write
	// (PostgreSQL): one sync before the run starts, not two.
	claimer, _ := r.st.(replica.RunClaimer)
	var record replica.Run
	if claimer != nil {
		if record, err = r.record(rec.snapshot()); err != nil {
			return r.unavailable(err)
		}
	}
	for settle := time.Now().Add(3 * time.Second); ; {
		if claimer != nil {
			var l kernel.Lease
			if l, err = claimer.ClaimRun(ctx, record, r.ttl); err == nil {
				lease = kernel.KeepLease(r.st, l, r.ttl)
			}
		} else {
			lease, err = kernel.HoldLease(ctx, r.st, rec.SessionID, r.name, r.ttl)
		}
		if !errors.Is(err, kernel.ErrLeaseHeld) {
			break
		}
		if run, ok, aerr := r.st.ActiveRun(ctx, rec.SessionID); aerr == nil && ok {
			return errBusy{fromRecord(run)}
		}
		if time.Now().After(settle) {
			var held *kernel.LeaseHeldError
			errors.As(err, &held)
			return conflict(runRunning, "session %s is held by %s (a run is starting or ending there): retry shortly", rec.SessionID, held.Holder)
		}
		select {
		case <-ctx.Done():
			return r.unavailable(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil {
		return r.unavailable(err)
	}
	rec.lease = lease
	if claimer != nil {
		return nil // recorded with the lease
	}
	if err := r.put(ctx, rec.snapshot()); err != nil {
		lease.Release(context.WithoutCancel(ctx))
		rec.lease = nil
		return r.unavailable(err)
	}
	return nil
}

// unavailable is a store failure as the API says it: 503 when the
// database cannot be reached (retry later), else the error (500).
func (r *replicas) unavailable(err error) error {
	if errors.Is(err, kernel.ErrSessionNotFound) {
		return err
	}
	r.s.logError("shared store: %v", err)
	e := errorf(codeStoreUnavailable, "the session store did not answer: retry later")
	e.retryAfter = 2
	return e
}

// started records a follow-up run that took over rec's session (and its
// lease).
func (r *replicas) started(ctx context.Context, rec *runRec) {
	if r.st == nil {
		return
	}
	if err := r.put(ctx, rec.snapshot()); err != nil {
		r.s.logError("session %s: record run %s: %v", rec.SessionID, rec.ID, err)
	}
}

// ended records the end of run snap on the board (which tells the other
// replicas).
func (r *replicas) ended(ctx context.Context, snap runRec) {
	if r.st == nil {
		return
	}
	if err := r.put(ctx, snap); err != nil {
		r.s.logError("session %s: record the end of run %s: %v", snap.SessionID, snap.ID, err)
	}
}

// letGo releases a run's lease: the session is free for any replica. It
// is released even when ctx is cancelled (the lease would lapse only
// after its ttl); the store's retries bound the call.
func (r *replicas) letGo(ctx context.Context, l *kernel.HeldLease) {
	if l == nil {
		return
	}
	if err := l.Release(context.WithoutCancel(ctx)); err != nil {
		r.s.logError("session %s: release lease: %v (it lapses by itself in %s)", l.Lease().SessionID, err, r.ttl)
	}
}

func (r *replicas) put(ctx context.Context, snap runRec) error {
	run, err := r.record(snap)
	if err != nil {
		return err
	}
	return r.st.PutRun(ctx, run)
}

// record is snap as the board keeps it.
func (r *replicas) record(snap runRec) (replica.Run, error) {
	b, err := json.Marshal(snap)
	if err != nil {
		return replica.Run{}, err
	}
	return replica.Run{ID: snap.ID, SessionID: snap.SessionID, Replica: r.name, Status: snap.Status,
		Created: snap.Created, Record: b}, nil
}

// fromRecord is a run of the board as the API shows it.
func fromRecord(run replica.Run) runRec {
	var rec runRec
	if err := json.Unmarshal(run.Record, &rec); err != nil || rec.ID == "" {
		rec = runRec{ID: run.ID, SessionID: run.SessionID, Created: run.Created}
	}
	rec.Status = run.Status
	return rec
}

// get returns a run another replica recorded.
func (r *replicas) get(ctx context.Context, id string) (runRec, bool) {
	if r.st == nil {
		return runRec{}, false
	}
	run, err := r.st.GetRun(ctx, id)
	if err != nil {
		if !errors.Is(err, replica.ErrRunNotFound) && ctx.Err() == nil {
			r.s.logError("get run %s: %v", id, err)
		}
		return runRec{}, false
	}
	return fromRecord(run), true
}

// active returns the session's run in flight on another replica.
func (r *replicas) active(ctx context.Context, sid string) (runRec, bool) {
	if r.st == nil {
		return runRec{}, false
	}
	run, ok, err := r.st.ActiveRun(ctx, sid)
	if err != nil {
		if ctx.Err() == nil {
			r.s.logError("session %s: active run: %v", sid, err)
		}
		return runRec{}, false
	}
	if !ok {
		return runRec{}, false
	}
	return fromRecord(run), true
}

// list returns the session's last runs on every replica, oldest first.
func (r *replicas) list(ctx context.Context, sid string) ([]runRec, bool) {
	if r.st == nil {
		return nil, false
	}
	runs, err := r.st.SessionRuns(ctx, sid, historyCap+1)
	if err != nil {
		if ctx.Err() == nil {
			r.s.logError("session %s: list runs: %v", sid, err)
		}
		return nil, false
	}
	out := make([]runRec, len(runs))
	for i, run := range runs {
		out[i] = fromRecord(run)
	}
	return out, true
}

// cancelRemote asks the replica running run id to cancel it and waits
// until the run has ended (or ctx ends).
func (r *replicas) cancelRemote(ctx context.Context, id string) (runRec, error) {
	if r.st == nil {
		return runRec{}, notFound("run", id)
	}
	ended := r.watchRun(id)
	defer r.unwatchRun(id, ended)
	marked, err := r.st.RequestCancel(ctx, id)
	if err != nil {
		return runRec{}, r.unavailable(err)
	}
	for {
		run, ok := r.get(ctx, id)
		if !ok {
			return runRec{}, notFound("run", id)
		}
		if run.Status != runRunning {
			if !marked {
				return run, conflict(run.Status, "run %s has ended (%s): nothing to cancel", id, run.Status)
			}
			return run, nil
		}
		if !marked { // running, but not on a live replica: it is an orphan, ended by the next sweep
			r.sweep(ctx)
		}
		select {
		case <-ctx.Done():
			return run, ctx.Err()
		case <-ended:
		case <-time.After(r.poll):
		}
	}
}

func (r *replicas) watchRun(id string) chan struct{} {
	c := make(chan struct{}, 1)
	r.mu.Lock()
	r.waiting[id] = append(r.waiting[id], c)
	r.mu.Unlock()
	return c
}

func (r *replicas) unwatchRun(id string, c chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.waiting[id]
	for i, w := range ws {
		if w == c {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(r.waiting, id)
	} else {
		r.waiting[id] = ws
	}
}

// notify tells the other replicas, best effort.
func (r *replicas) notify(ctx context.Context, n replica.Notice) {
	if r.st == nil {
		return
	}
	if err := r.st.Notify(ctx, n); err != nil {
		r.s.logError("notify other replicas: %v", err)
	}
}

// run starts the replica's listener and sweeper; stop ends them.
func (r *replicas) run() {
	if r.st == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		_ = r.st.Listen(ctx, func(n replica.Notice) { r.onNotice(ctx, n) })
	}()
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(r.poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.sweep(ctx)
			}
		}
	}()
}

// halt stops the listener and the sweeper and waits for them.
func (r *replicas) halt() {
	if r.stop != nil {
		r.stop()
		r.wg.Wait()
	}
}

// onNotice handles one notice of another replica (or of this one); ctx is
// the listener's.
func (r *replicas) onNotice(ctx context.Context, n replica.Notice) {
	switch n.Kind {
	case replica.NoticeEvents:
		r.s.hub.remote(n.Session, n.Seq)
	case replica.NoticeInbox:
		r.s.hub.touchInbox(n.Owner)
	case replica.NoticeRun:
		r.mu.Lock()
		for _, c := range r.waiting[n.Run] {
			select {
			case c <- struct{}{}:
			default:
			}
		}
		r.mu.Unlock()
	case replica.NoticeCancel:
		r.s.runs.cancelLocal(n.Run)
	case replica.NoticeFollowUp:
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.startWaiting(ctx, n.Session)
		}()
	case replica.NoticeResync:
		r.s.hub.remoteAll()
	}
}

// sweep is the polling fallback and the failover: it looks at the store
// for what notices may have missed (events of watched sessions, cancel
// requests for this replica's runs), ends the runs of replicas that lost
// their leases, starts follow-ups nobody runs, and, with AutoResume,
// continues the sessions a stopped replica left running.
func (r *replicas) sweep(ctx context.Context) {
	if ids := r.s.hub.watched(); len(ids) > 0 {
		heads, err := r.st.EventHeads(ctx, ids)
		if err == nil {
			for id, seq := range heads {
				r.s.hub.remote(id, seq)
			}
		}
	}
	if ids, err := r.st.CancelRequests(ctx, r.name); err == nil {
		for _, id := range ids {
			r.s.runs.cancelLocal(id)
		}
	}
	err := r.st.EndOrphanRuns(ctx, func(run replica.Run) (string, json.RawMessage) { return r.endOrphan(ctx, run) })
	r.sweepFailed(ctx, err)
	if ids, err := r.st.FollowUpsWaiting(ctx); err == nil {
		for _, id := range ids {
			r.startWaiting(ctx, id)
		}
	}
	if r.s.cfg.AutoResume {
		if ids, err := r.st.Orphans(ctx); err == nil {
			for _, id := range ids {
				r.resume(ctx, id)
			}
		}
	}
}

// endOrphan is how a run a stopped replica left running ended, as far as
// its session tells: a session no longer running was ended by the run
// (its replica stopped after storing the end, before recording it); one
// still running was interrupted, and waits to be resumed.
func (r *replicas) endOrphan(ctx context.Context, run replica.Run) (string, json.RawMessage) {
	rec := fromRecord(run)
	rec.Status, rec.Ended = runFailed, time.Now().UTC()
	rec.Error = fmt.Sprintf("replica %s stopped before the run ended (its lease of the session lapsed)", run.Replica)
	if r.takenOver(ctx, run) {
		// The session was resumed since (and the resume may have
		// ended it already): its state is not this run's end, and this
		// run stopped before its own.
		b, _ := json.Marshal(rec)
		return rec.Status, b
	}
	if se, err := r.st.Load(ctx, run.SessionID); err == nil {
		switch se.Meta.Status {
		case kernel.StatusIdle, kernel.StatusAwaitingApproval:
			rec.Status = runCompleted
			rec.Error = fmt.Sprintf("replica %s stopped after the run ended, before it recorded the end: the session's state is the run's end", run.Replica)
			if se.Meta.Status == kernel.StatusAwaitingApproval {
				rec.StopReason = kernel.StopAwaitingApproval
			}
		case kernel.StatusFailed:
			rec.Error = fmt.Sprintf("the run failed, and replica %s stopped before it recorded why", run.Replica)
		}
	}
	b, _ := json.Marshal(rec)
	return rec.Status, b
}

// takenOver reports whether the session of run has been resumed since
// run started. A session is resumed only when it was left running, so
// run did not end it. A sweep can find the session orphaned (and resume
// it) before it finds run orphaned: the lease lapses between its two
// reads. By then the resume may have ended the session, which must not
// be read as run's own end. (A later prompt run says nothing: it starts
// on a session run had ended.)
func (r *replicas) takenOver(ctx context.Context, run replica.Run) bool {
	runs, err := r.st.SessionRuns(ctx, run.SessionID, historyCap+1)
	if err != nil {
		return false
	}
	for _, o := range runs {
		if o.ID != run.ID && o.Created.After(run.Created) && fromRecord(o).Kind == kindResume {
			return true
		}
	}
	return false
}

// sweepFailed logs a failure of the sweep once, not every poll, until
// the sweep works again.
func (r *replicas) sweepFailed(ctx context.Context, err error) {
	switch {
	case err == nil:
		if r.failing.Swap(false) {
			r.s.logError("the shared store answers again")
		}
	case ctx.Err() != nil:
	case !r.failing.Swap(true):
		r.s.logError("sweep the shared store: %v (said once until it answers again)", err)
	}
}

// begin marks sid as being started by a sweep or a notice; false when it
// already is, or runs here.
func (r *replicas) begin(sid string) bool {
	if r.s.draining.Load() || r.s.runs.isStopping() {
		return false
	}
	if _, ok := r.s.runs.activeLocal(sid); ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.starting[sid] {
		return false
	}
	r.starting[sid] = true
	return true
}

func (r *replicas) done(sid string) {
	r.mu.Lock()
	delete(r.starting, sid)
	r.mu.Unlock()
}

// resume continues a session another replica left running (failover),
// under the crash-repair rules of Kernel.Continue.
func (r *replicas) resume(ctx context.Context, sid string) {
	if !r.begin(sid) {
		return
	}
	defer r.done(sid)
	se, err := r.st.Load(ctx, sid)
	if err != nil || se.Meta.Status != kernel.StatusRunning || se.Meta.Labels[labelOwner] == "" {
		return // gone, resumed meanwhile, or not a server's session
	}
	_, err = r.s.runs.start(ctx, sid, se.Meta.Labels[labelOwner], sweepKey(se, "failover"), kindResume, func(ctx context.Context, k *kernel.Kernel) (*kernel.RunResult, error) {
		return k.Continue(ctx, sid)
	})
	if err != nil && !isBusy(err) {
		r.s.logError("fail over session %s: %v", sid, err)
	}
}

// startWaiting starts the session's oldest queued follow-up when no
// replica runs the session (runManager.startWaiting).
func (r *replicas) startWaiting(ctx context.Context, sid string) {
	if r.st == nil || !r.begin(sid) {
		return
	}
	defer r.done(sid)
	r.s.runs.startWaiting(ctx, sid)
}

// sweepKey is the "key" a run the server starts by itself counts against:
// its own, named after the session's creator (the per-key limit is for
// clients).
func sweepKey(se *kernel.Session, why string) *Key {
	k := &Key{ID: why + ":" + se.Meta.ID, Name: se.Meta.Labels[labelPrincipal]}
	if k.Name == "" {
		k.Name = why
	}
	return k
}

func isBusy(err error) bool {
	var busy errBusy
	var ae *apiError
	return errors.As(err, &busy) || errors.As(err, &ae) && ae.Status == http.StatusConflict
}
