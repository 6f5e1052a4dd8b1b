package kernel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// forgetfulInbox is a queue whose Delivered fails: the process stopped
// before it could tell the queue.
type forgetfulInbox struct{ *queue.Dir }

func (forgetfulInbox) Delivered(context.Context, string, []string) error {
	return errors.New("the process stopped")
}

// countPrompts counts the user messages of session id with text.
func countPrompts(t *testing.T, st kernel.Store, id, text string) int {
	t.Helper()
	se, err := st.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range se.Messages {
		if m.Role == kernel.RoleUser && m.Content == text {
			n++
		}
	}
	return n
}

// TestFollowUpRunsOnce: a follow-up taken from the queue runs exactly
// once whatever point the process stops at: between taking it and storing
// its prompt (taken again, run); between storing its prompt and telling
// the queue (the resumed run settles it; it is not taken again); after
// its run, the queue never told (taken again, found in the session, not
// run). Without the queue keeping a taken follow-up until it is stored it
// is lost; without the session's record of it, it runs twice.
func TestFollowUpRunsOnce(t *testing.T) {
	ctx := context.Background()
	for _, stop := range []string{"after take", "after store", "after run"} {
		t.Run(stop, func(t *testing.T) {
			q, err := queue.Open(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			st := memory.New()
			newKernel := func(store kernel.Store, inbox kernel.Inbox, replies ...kerneltest.Reply) (*kernel.Kernel, *kerneltest.Provider) {
				prov := kerneltest.NewProvider(replies...)
				k, err := kernel.New(kernel.Config{Store: store, Inbox: inbox, Provider: prov})
				if err != nil {
					t.Fatal(err)
				}
				return k, prov
			}
			k, _ := newKernel(st, q, kerneltest.Text("first answer"))
			res, err := k.Run(ctx, "", "first")
			if err != nil {
				t.Fatal(err)
			}
			sid := res.SessionID
			if _, err := q.Add(ctx, sid, "and then this", queue.FollowUp); err != nil {
				t.Fatal(err)
			}
			fu, err := q.TakeFollowUp(ctx, sid)
			if err != nil || fu == nil {
				t.Fatalf("TakeFollowUp = %v, %v", fu, err)
			}
			switch stop {
			case "after take": // nothing else happened
			case "after store":
				dying := &failAfter{Store: st, n: 1} // the prompt is stored, then nothing
				kd, _ := newKernel(dying, forgetfulInbox{q}, kerneltest.Text("never"))
				if _, err := kd.RunQueued(ctx, sid, fu.Queued); err == nil {
					t.Fatal("RunQueued succeeded on a dying store")
				}
				// The session was left running: it is resumed, and the
				// resume settles the queue.
				kr, _ := newKernel(st, q, kerneltest.Text("resumed answer"))
				if _, err := kr.Continue(ctx, sid); err != nil {
					t.Fatal(err)
				}
			case "after run":
				kf, _ := newKernel(st, forgetfulInbox{q}, kerneltest.Text("follow-up answer"))
				if _, err := kf.RunQueued(ctx, sid, fu.Queued); err != nil {
					t.Fatal(err)
				}
			}
			// The next taker (a restarted process, another replica).
			k2, prov := newKernel(st, q, kerneltest.Text("follow-up answer"))
			if next, err := q.TakeFollowUp(ctx, sid); err != nil {
				t.Fatal(err)
			} else if next != nil {
				_, err := k2.RunQueued(ctx, sid, next.Queued)
				if stop == "after run" && !errors.Is(err, kernel.ErrAlreadyDelivered) {
					t.Fatalf("RunQueued of a follow-up the session holds = %v, want ErrAlreadyDelivered", err)
				}
				if stop == "after take" && err != nil {
					t.Fatal(err)
				}
				if stop == "after store" {
					t.Fatalf("the follow-up was taken again after the resumed run settled it: %+v", next)
				}
			}
			if n := countPrompts(t, st, sid, "and then this"); n != 1 {
				t.Fatalf("the follow-up is in the session %d times, want once", n)
			}
			if stop == "after run" && prov.Remaining() != 1 {
				t.Fatal("the model was called for a follow-up the session already held")
			}
			if left, _ := q.TakeFollowUp(ctx, sid); left != nil {
				t.Fatalf("the follow-up is still queued: %+v", left)
			}
		})
	}
}
