package kernel

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// wait fails the test unless ch closes: the deadline is far, so a failure
// means the timer never fired, not that the machine was slow.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: the context never ended", what)
	}
}

func (w *deadlines) listed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.calls)
}

func TestCallCtxDeadline(t *testing.T) {
	var w deadlines
	defer w.stop()
	now := time.Now()
	c := w.start(context.Background(), now, 10*time.Millisecond)
	if d, ok := c.Deadline(); !ok || !d.Equal(now.Add(10*time.Millisecond)) {
		t.Fatalf("Deadline() = %v, %v", d, ok)
	}
	if c.Err() != nil {
		t.Fatalf("Err before the deadline: %v", c.Err())
	}
	wait(t, c.Done(), "deadline")
	if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, Cause = %v; want DeadlineExceeded", c.Err(), context.Cause(c))
	}
	c.end() // the deferred end after a timeout changes nothing
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("end replaced the error: %v", c.Err())
	}
	if n := w.listed(); n != 0 {
		t.Fatalf("%d calls still listed", n)
	}
}

// A context derived from a call's context ends with it, with the same
// error and cause, and the standard library starts no goroutine to watch
// the call's context: callCtx is an afterFuncer.
func TestCallCtxDerived(t *testing.T) {
	parent, cancelParent := context.WithCancelCause(context.Background())
	defer cancelParent(nil)
	var w deadlines
	defer w.stop()
	c := w.start(parent, time.Now(), time.Hour)

	before := runtime.NumGoroutine()
	var children []context.Context
	for range 50 {
		child, cancel := context.WithCancel(c)
		defer cancel()
		children = append(children, child)
	}
	timed, cancelTimed := context.WithTimeout(c, time.Hour)
	defer cancelTimed()
	if n := runtime.NumGoroutine(); n >= before+50 {
		t.Fatalf("deriving 50 contexts started %d goroutines", n-before)
	}

	why := errors.New("user pressed ctrl-c")
	cancelParent(why)
	wait(t, c.Done(), "parent cancelled")
	for i, ch := range append(children, timed) {
		wait(t, ch.Done(), "derived context")
		if !errors.Is(ch.Err(), context.Canceled) || context.Cause(ch) != why {
			t.Fatalf("child %d: Err = %v, Cause = %v; want Canceled, %v", i, ch.Err(), context.Cause(ch), why)
		}
	}
	if !errors.Is(c.Err(), context.Canceled) || context.Cause(c) != why {
		t.Fatalf("Err = %v, Cause = %v", c.Err(), context.Cause(c))
	}
}

// The call's own deadline reaches derived contexts as DeadlineExceeded,
// which is how a tool or provider tells a timeout from a cancellation.
func TestCallCtxDeadlineReachesChildren(t *testing.T) {
	var w deadlines
	defer w.stop()
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := w.start(parent, time.Now(), 5*time.Millisecond)
	child, cancelChild := context.WithCancelCause(c)
	defer cancelChild(nil)
	after := make(chan struct{})
	stop := context.AfterFunc(c, func() { close(after) })
	wait(t, child.Done(), "child")
	wait(t, after, "AfterFunc")
	if stop() {
		t.Fatal("stop after the function ran reported true")
	}
	if !errors.Is(child.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(child), context.DeadlineExceeded) {
		t.Fatalf("child: Err = %v, Cause = %v", child.Err(), context.Cause(child))
	}
	if parent.Err() != nil {
		t.Fatal("the call's deadline cancelled its parent")
	}
}

// end is the deferred cancel of a context.WithTimeout: whatever the tool
// left waiting on the context learns the call is over.
func TestCallCtxEnd(t *testing.T) {
	var w deadlines
	defer w.stop()
	c := w.start(context.Background(), time.Now(), time.Hour)
	done := c.Done()
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	unrun := context.AfterFunc(c, func() { t.Error("a stopped AfterFunc ran") })
	if !unrun() {
		t.Fatal("stop before cancel reported false")
	}
	c.end()
	wait(t, done, "end")
	wait(t, ran, "AfterFunc")
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err = %v", c.Err())
	}
	// Done asked for the first time after the end is closed too.
	c2 := w.start(context.Background(), time.Now(), time.Hour)
	c2.end()
	wait(t, c2.Done(), "Done after end")
	if n := w.listed(); n != 0 {
		t.Fatalf("%d calls still listed", n)
	}
}

// A parent that ended is seen by Err at once, and then Done is closed:
// Err is never set while Done is open.
func TestCallCtxParentErrWithoutDone(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	var w deadlines
	defer w.stop()
	c := w.start(parent, time.Now(), time.Hour)
	cancel()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err = %v", c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Err is set but Done is open")
	}
}

func TestCallCtxParentDeadlineFirst(t *testing.T) {
	at := time.Now().Add(time.Minute)
	parent, cancel := context.WithDeadline(context.Background(), at)
	defer cancel()
	var w deadlines
	defer w.stop()
	c := w.start(parent, time.Now(), time.Hour)
	defer c.end()
	if d, _ := c.Deadline(); !d.Equal(at) {
		t.Fatalf("Deadline() = %v, want the parent's %v", d, at)
	}
}

// One timer serves calls with different deadlines: each ends at its own,
// in order, and a call with a far deadline is left running.
func TestDeadlinesOneTimerManyCalls(t *testing.T) {
	var w deadlines
	defer w.stop()
	now := time.Now()
	far := w.start(context.Background(), now, time.Hour)
	late := w.start(context.Background(), now, 40*time.Millisecond)
	early := w.start(context.Background(), now, 10*time.Millisecond)
	wait(t, early.Done(), "early")
	wait(t, late.Done(), "late")
	for _, c := range []*callCtx{early, late} {
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", c.Err())
		}
	}
	if far.Err() != nil {
		t.Fatalf("the far call ended: %v", far.Err())
	}
	w.mu.Lock()
	armed, n := w.at, len(w.calls)
	w.mu.Unlock()
	if n != 1 || !armed.Equal(far.deadline) {
		t.Fatalf("after two deadlines: %d calls listed, timer at %v, want 1 and %v", n, armed, far.deadline)
	}
	far.end()
}

// Concurrent starts, ends and deadlines, under -race: every context ends
// with one error, and the list is empty afterwards.
func TestDeadlinesConcurrent(t *testing.T) {
	var w deadlines
	defer w.stop()
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				timeout := time.Hour
				if (g+i)%3 == 0 {
					timeout = time.Duration(i%4) * time.Millisecond
				}
				c := w.start(parent, time.Now(), timeout)
				child, cc := context.WithCancel(c)
				if timeout < time.Hour {
					wait(t, child.Done(), "short deadline")
				}
				c.end()
				wait(t, child.Done(), "after end")
				cc()
				if err := c.Err(); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Err = %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if n := w.listed(); n != 0 {
		t.Fatalf("%d calls still listed", n)
	}
}
