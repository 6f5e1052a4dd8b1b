package subprocess

import (
	"context"
	"testing"
	"time"
)

// lateTimer is a context whose deadline has passed but whose timer has not
// run yet (Err is nil, Done open): what a loaded machine shows a call
// whose plugin answered DeadlineExceeded a moment before the runtime ran
// the context's timer.
type lateTimer struct {
	context.Context
	dl time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.dl, true }

// TestPastDeadlineBeforeTheTimerRuns: a call that failed after its
// deadline is a timeout even while its context's timer is late; it used to
// be reported as a plain transport error ("call plugin …: Deadline
// exceeded", code tool_error) and the plugin was not killed.
func TestPastDeadlineBeforeTheTimerRuns(t *testing.T) {
	late := lateTimer{Context: context.Background(), dl: time.Now().Add(-time.Second)}
	if !pastDeadline(late) {
		t.Error("a call whose deadline passed a second ago, its context's timer not yet run: not taken as a timeout")
	}
	if pastDeadline(context.Background()) {
		t.Error("a call without a deadline taken as a timeout")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	if pastDeadline(ctx) {
		t.Error("a call an hour before its deadline taken as a timeout")
	}
	cancel()
	if pastDeadline(ctx) {
		t.Error("a cancelled call taken as a timeout")
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if !pastDeadline(ctx) {
		t.Error("a call whose context ended with DeadlineExceeded: not taken as a timeout")
	}
}
