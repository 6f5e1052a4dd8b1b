package kernel

import (
	"context"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/tool"
)

// deadlines is a run's one timer for the deadlines of its model and tool
// calls (RATIONALE.md, "One deadline timer per run"). A call's context is a
// callCtx listed here while the call runs; the timer is armed for the
// earliest deadline listed, or later when that call ended first, and on
// firing it cancels the calls that are due and re-arms for the next. Nearly
// every call ends long before its deadline, so a call costs a list
// insertion and removal instead of a context.WithTimeout (a timer, a
// cancelCtx, a registration with the parent and a closure).
//
// The zero value is ready; stop releases the timer when the run ends.
type deadlines struct {
	mu    sync.Mutex
	timer *time.Timer
	at    time.Time // when the timer fires; zero when it is not armed
	calls []*callCtx
	buf   [2]*callCtx // calls' first array: a run rarely has more at once
}

// start returns the context of a call that begins at now (a monotonic
// reading) and must end within timeout. The caller ends it with end.
func (w *deadlines) start(parent context.Context, now time.Time, timeout time.Duration) *callCtx {
	c := new(callCtx)
	w.begin(c, parent, now, timeout)
	return c
}

// begin is start with the context's memory from the caller (a tool call's
// lives in its Call); c must be zero, its progress receiver aside.
func (w *deadlines) begin(c *callCtx, parent context.Context, now time.Time, timeout time.Duration) {
	c.parent, c.deadline, c.w = parent, now.Add(timeout), w
	w.list(c, now)
}

// beginQueued is begin for a tool call that may wait in line (for the
// kernel's tool slots when inLine, or in the tool's own queues, which it
// reports through tool.Queue) before its work starts: while in line its
// deadline is queueLimit from now, and Started gives it timeout from then.
// Time in line is the kernel's, bounded by its own limit, and never
// charged to the tool's timeout (RATIONALE.md, "Time in line is not the
// tool's").
func (w *deadlines) beginQueued(c *callCtx, parent context.Context, now time.Time, timeout, queueLimit time.Duration, inLine bool) {
	c.parent, c.w = parent, w
	c.timeout, c.queueLimit, c.since = timeout, queueLimit, now
	c.queued, c.deadline = inLine, now.Add(timeout)
	if inLine {
		c.deadline = now.Add(queueLimit)
	}
	w.list(c, now)
}

// list adds c, whose deadline is set, and arms the timer for it if it is
// the earliest.
func (w *deadlines) list(c *callCtx, now time.Time) {
	w.mu.Lock()
	if w.calls == nil {
		w.calls = w.buf[:0]
	}
	c.idx = len(w.calls)
	w.calls = append(w.calls, c)
	if w.at.IsZero() || c.deadline.Before(w.at) {
		w.armLocked(now, c.deadline)
	}
	w.mu.Unlock()
}

func (w *deadlines) armLocked(now, at time.Time) {
	w.at = at
	if w.timer == nil {
		w.timer = time.AfterFunc(at.Sub(now), w.fire)
		return
	}
	w.timer.Reset(at.Sub(now))
}

// fire cancels the calls whose deadline has passed and re-arms the timer for
// the earliest one left.
func (w *deadlines) fire() {
	now := time.Now()
	var due []*callCtx
	w.mu.Lock()
	var next time.Time
	for _, c := range w.calls {
		switch {
		case !c.deadline.After(now):
			due = append(due, c)
		case next.IsZero() || c.deadline.Before(next):
			next = c.deadline
		}
	}
	w.at = time.Time{}
	if !next.IsZero() {
		w.armLocked(now, next)
	}
	w.mu.Unlock()
	for _, c := range due {
		c.cancel(context.DeadlineExceeded)
	}
}

// move sets the deadline of c, if it is still listed, to at, arming the
// timer for it when it is now the earliest. A later deadline needs no
// timer change: a firing that finds nothing due re-arms for what is left.
func (w *deadlines) move(c *callCtx, now, at time.Time, queued bool) {
	w.mu.Lock()
	if c.idx >= 0 {
		c.deadline, c.queued = at, queued
		if w.at.IsZero() || at.Before(w.at) {
			w.armLocked(now, at)
		}
	}
	w.mu.Unlock()
}

// remove takes c off the list. Lock order: c.mu, then w.mu (w's methods
// never take a call's lock).
func (w *deadlines) remove(c *callCtx) {
	w.mu.Lock()
	if i := c.idx; i >= 0 {
		last := len(w.calls) - 1
		w.calls[i] = w.calls[last]
		w.calls[i].idx = i
		w.calls[last] = nil
		w.calls = w.calls[:last]
		c.idx = -1
	}
	w.mu.Unlock()
}

// stop disarms the timer; the run is over.
func (w *deadlines) stop() {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.at = time.Time{}
	w.mu.Unlock()
}

// callCtx is the context of one call: its parent's values and cancellation
// and the call's own deadline, enforced by the run's deadlines. It keeps the
// standard contexts' contract: Done is closed and Err is
// context.DeadlineExceeded once the deadline passes, and the parent's error
// once the parent is done; context.Cause returns the parent's cause, or Err;
// Deadline is the earlier of the call's and the parent's; contexts derived
// from it are cancelled with it without a goroutine of their own (it is an
// afterFuncer); and it is cancelled (context.Canceled) when the call ends,
// as a context.WithTimeout would be by its deferred cancel.
type callCtx struct {
	parent   context.Context
	deadline time.Time // guarded by w.mu once listed
	w        *deadlines
	idx      int // position in w.calls, -1 once removed; guarded by w.mu
	// queued: the call waits in line and deadline is since+queueLimit;
	// guarded by w.mu once listed. timeout, queueLimit and since are set
	// by beginQueued and not changed; queueLimit is zero for a call that
	// cannot wait in line (a model call, or a kernel without a queue
	// limit), whose context answers no tool.QueueKey.
	queued              bool
	timeout, queueLimit time.Duration
	since               time.Time
	// progress receives the tool's ReportProgress calls (Value of
	// tool.ProgressKey); nil for model calls and when nobody listens.
	progress tool.Reporter
	// deleg is the delegation of an agent call (Value of delegationKey);
	// nil for every other call.
	deleg *delegation
	// st is the run's state of a tool call the kernel dispatched (Value of
	// callSessionKey, read by CallSession); nil for model calls.
	st *State

	mu   sync.Mutex
	done chan struct{} // made by the first Done, or closedChan
	err  error
	// afters are the functions AfterFunc registered, run once at cancel.
	afters map[*func()]struct{}
	// unwatch stops the parent's AfterFunc, registered when Done or
	// AfterFunc is first used and the parent can be cancelled.
	unwatch func() bool
}

// closedChan is the Done channel of a context that ended before anybody
// asked for one.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// end cancels the call's context: the call is over.
func (c *callCtx) end() { c.cancel(context.Canceled) }

// cancel ends the context with err unless it already ended, and returns the
// error it ended with.
func (c *callCtx) cancel(err error) error {
	c.mu.Lock()
	if c.err != nil {
		err = c.err
		c.mu.Unlock()
		return err
	}
	c.err = err
	c.w.remove(c) // before Done closes: whoever sees it closed sees the list without c
	if c.done == nil {
		c.done = closedChan
	} else {
		close(c.done)
	}
	afters, unwatch := c.afters, c.unwatch
	c.afters, c.unwatch = nil, nil
	c.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	for f := range afters {
		(*f)()
	}
	return err
}

// watchParentLocked makes the parent's cancellation cancel c, for the
// channel Done returned and the functions AfterFunc registered. Err needs
// no watch: it asks the parent.
func (c *callCtx) watchParentLocked() {
	if c.unwatch != nil || c.parent.Done() == nil {
		return
	}
	c.unwatch = context.AfterFunc(c.parent, func() { c.cancel(c.parent.Err()) })
}

// Deadline is the earlier of the call's deadline and the parent's. A call
// waiting in line has its queue limit's deadline until it starts.
func (c *callCtx) Deadline() (time.Time, bool) {
	c.w.mu.Lock()
	own := c.deadline
	c.w.mu.Unlock()
	if d, ok := c.parent.Deadline(); ok && d.Before(own) {
		return d, true
	}
	return own, true
}

// Queued implements tool.Queuer: the call waits in the tool's queues, and
// its deadline is the kernel's queue limit counted from when the call
// began (its wait for the kernel's tool slots included).
func (c *callCtx) Queued() {
	if c.queueLimit > 0 {
		c.w.move(c, time.Now(), c.since.Add(c.queueLimit), true)
	}
}

// Started implements tool.Queuer: the tool's work begins, and its timeout
// with it.
func (c *callCtx) Started() {
	if c.queueLimit > 0 {
		now := time.Now()
		c.w.move(c, now, now.Add(c.timeout), false)
	}
}

// stoppedInLine reports whether the call's deadline was its queue limit's
// when it was last set: a call that ended by DeadlineExceeded ended in
// line.
func (c *callCtx) stoppedInLine() bool {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.queued
}

// Done returns a channel closed when the context ends.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		c.watchParentLocked()
	}
	return c.done
}

// Err returns nil while the context runs, then why it ended. A parent that
// ended ends c at once, so Done is closed whenever Err is not nil.
func (c *callCtx) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if perr := c.parent.Err(); perr != nil {
		return c.cancel(perr)
	}
	return nil
}

// Value is the parent's, except for a tool call's progress receiver,
// delegation, queue and session.
func (c *callCtx) Value(key any) any {
	if _, ok := key.(callSessionKey); ok && c.st != nil {
		return c.st
	}
	if c.deleg != nil {
		if _, ok := key.(delegationKey); ok {
			return c.deleg
		}
	}
	if c.progress != nil {
		if _, ok := key.(tool.ProgressKey); ok {
			return c.progress
		}
	}
	if _, ok := key.(tool.QueueKey); ok {
		// Never the parent's: a tool of a child run must not move the
		// deadline of the agent call that runs it.
		if c.queueLimit > 0 {
			return tool.Queuer(c)
		}
		return nil
	}
	return c.parent.Value(key)
}

// AfterFunc runs f once the context ends (at once if it has ended); stop
// unregisters it and reports whether it did so before f ran. The context
// package uses it to cancel a context derived from c without starting a
// goroutine to wait for c.
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if c.afters == nil {
		c.afters = map[*func()]struct{}{}
	}
	key := &f
	c.afters[key] = struct{}{}
	c.watchParentLocked()
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.afters[key]
		delete(c.afters, key)
		return ok
	}
}

func (c *callCtx) String() string { return "kernel.callCtx" }
