package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// storedWhenCalled is a tool that, when it runs, reads its session from
// the store: what was durable before the effect.
type storedWhenCalled struct {
	spec  kernel.ToolSpec
	store kernel.Store
	seen  []*kernel.Session
}

func (s *storedWhenCalled) Spec() kernel.ToolSpec { return s.spec }

func (s *storedWhenCalled) Call(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
	list, _ := s.store.List(ctx)
	se, err := s.store.Load(ctx, list[0].ID)
	if err != nil {
		return kernel.Result{}, err
	}
	s.seen = append(s.seen, se)
	return kernel.Result{Content: "done"}, nil
}

func watcher(name string, tier kernel.Tier, st kernel.Store) *storedWhenCalled {
	return &storedWhenCalled{spec: kernel.ToolSpec{Name: name, Description: "reads the store when called", Tier: tier, Source: "test",
		Schema: json.RawMessage(`{"type":"object"}`)}, store: st}
}

// TestIntentStoredBeforeTheEffect: when a side-effecting call runs, the
// store already holds its intent (SessionMeta.Round) and the session is
// running; a read-only call records none; once the round's results are
// stored the round is closed.
func TestIntentStoredBeforeTheEffect(t *testing.T) {
	st := memory.New()
	write := watcher("write", kernel.TierSideEffecting, st)
	read := watcher("read", kernel.TierReadOnly, st)
	k, err := kernel.New(kernel.Config{Store: st, Tools: registry(t, write, read), Provider: kerneltest.NewProvider(
		kerneltest.Calls("read", `{}`, "write", `{}`), kerneltest.Text("ok"))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "go")
	if err != nil {
		t.Fatal(err)
	}
	if len(read.seen) != 1 || len(write.seen) != 1 {
		t.Fatalf("read ran %d times, write %d", len(read.seen), len(write.seen))
	}
	rd := read.seen[0].Meta.Round
	if rd == nil || rd.Seq != 2 || len(rd.Started) != 0 {
		t.Fatalf("when the read-only call ran, the round was %+v, want seq 2 and no intent", rd)
	}
	w := write.seen[0].Meta
	if w.Round == nil || w.Round.Seq != 2 || len(w.Round.Started) != 1 || w.Round.Started[0].CallID != "c2" || w.Round.Started[0].Tool != "write" {
		t.Fatalf("when the side-effecting call ran, the round was %+v, want its intent (c2, write)", w.Round)
	}
	if w.Status != kernel.StatusRunning {
		t.Fatalf("when the call ran the session was %s, want running", w.Status)
	}
	se := checkHistory(t, st, res.SessionID)
	if se.Meta.Round != nil {
		t.Fatalf("after the round the session still has %+v", se.Meta.Round)
	}
}

// stealAt runs the calls of one round of the write tool in a session
// whose lease the run holds; the lease is taken over right before the
// write's nth execution (a hook stands in for a pause after policy and
// hooks passed it). It returns the store, the tool and the run's error.
func stealAt(t *testing.T, nth int, calls ...any) (*leaseStore, *kerneltest.Recorder, error) {
	t.Helper()
	st := &leaseStore{Store: memory.New()}
	ctx := context.Background()
	if err := st.Store.Commit(ctx, "s", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}); err != nil {
		t.Fatal(err)
	}
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	n := 0
	steal := func(next kernel.Handler) kernel.Handler {
		return kernel.HandlerFunc(func(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
			if n++; n == nth {
				st.steal()
			}
			return next.Handle(ctx, c)
		})
	}
	k, err := kernel.New(kernel.Config{Store: st, Tools: registry(t, write), Hooks: []kernel.Hook{steal},
		Provider: kerneltest.NewProvider(kerneltest.Calls(calls...), kerneltest.Text("done"))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := kernel.HoldLease(ctx, st, "s", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	_, err = k.With(kernel.RunOptions{Lease: h}).Run(ctx, "s", "go")
	return st, write, err
}

// TestLostLeaseStopsTheEffect: the lease is taken over after policy and
// hooks passed a side-effecting call and before it runs. The intent's
// write is refused, so the tool never runs and the run ends with
// ErrLeaseLost, writing nothing more. Without the intent record the tool
// would run after another holder took over.
func TestLostLeaseStopsTheEffect(t *testing.T) {
	st, write, err := stealAt(t, 1, "write", `{}`)
	if !errors.Is(err, kernel.ErrLeaseLost) {
		t.Fatalf("the run ended with %v, want ErrLeaseLost", err)
	}
	if n := len(write.Calls()); n != 0 {
		t.Fatalf("the side effect ran %d times after the lease was lost, want 0", n)
	}
	se, _ := st.Load(context.Background(), "s")
	if len(se.Messages) != 2 || se.Meta.Round == nil || len(se.Meta.Round.Started) != 0 {
		t.Fatalf("after the refused intent the session holds %d messages and round %+v; want the prompt, the call, no intent", len(se.Messages), se.Meta.Round)
	}
}

// TestLostLeaseStopsTheRoundsNextCall: a round of two side-effecting
// calls; the lease is taken over after the first ran and before the
// second runs. Each call is fenced on its own (not the round once, nor
// only when the round's results are stored): the second call's intent is
// refused, so it never runs, and the round's results are not stored
// either. Fenced once per round, the second call would run after another
// owner took the session over.
func TestLostLeaseStopsTheRoundsNextCall(t *testing.T) {
	st, write, err := stealAt(t, 2, "write", `{"n":1}`, "write", `{"n":2}`)
	if !errors.Is(err, kernel.ErrLeaseLost) {
		t.Fatalf("the run ended with %v, want ErrLeaseLost", err)
	}
	if calls := write.Calls(); len(calls) != 1 || !strings.Contains(string(calls[0]), `"n":1`) {
		t.Fatalf("the side effects that ran: %s; want only the first call's (the lease was lost before the second)", calls)
	}
	se, _ := st.Load(context.Background(), "s")
	if se.Meta.Round == nil || len(se.Meta.Round.Started) != 1 || len(se.Messages) != 2 {
		t.Fatalf("after the refused second intent the session holds %d messages and round %+v; want the prompt, the calls, the first call's intent", len(se.Messages), se.Meta.Round)
	}
}

// notRunChecker is a side-effecting tool whose SideEffectChecker always
// says the call did not run (what write_file says of a file not yet
// written).
type notRunChecker struct{ *kerneltest.Recorder }

func (notRunChecker) CheckSideEffect(context.Context, json.RawMessage, time.Time) (kernel.SideEffect, string) {
	return kernel.SideEffectNotRun, "the file is absent"
}

// TestRepairReadsTheIntents: a session left by a crash in a round whose
// intents were recorded: the call with an intent is answered "may have
// run" even though its tool's check says it did not (its owner may run it
// late), the side-effecting call without one "did not run", the read-only
// call "interrupted". The status stays running until the model answers,
// so a kill during that model call leaves a resumable session.
func TestRepairReadsTheIntents(t *testing.T) {
	st := memory.New()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute).UTC()
	calls := []kernel.ToolCall{{ID: "c1", Name: "write", Arguments: `{}`}, {ID: "c2", Name: "write", Arguments: `{}`}, {ID: "c3", Name: "read", Arguments: `{}`}}
	rec := &kernel.ApprovalRecord{ID: "a1", Approved: true, By: "alice"}
	meta := kernel.SessionMeta{ID: "s1", Status: kernel.StatusRunning, Runs: 1, Turns: 1,
		Round: &kernel.Round{Seq: 2, Started: []kernel.Intent{{CallID: "c1", Tool: "write", Time: t0, Approval: rec}}}}
	if err := st.Commit(ctx, "s1", kernel.Step{Meta: meta, Messages: []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "write twice", Time: t0},
		{Seq: 2, Role: kernel.RoleAssistant, ToolCalls: calls, Time: t0},
	}}); err != nil {
		t.Fatal(err)
	}
	write := notRunChecker{kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")}
	read := kerneltest.NewRecorder("read", kernel.TierReadOnly, "read")
	var during *kernel.Session
	prov := providerFunc(func(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
		during, _ = st.Load(ctx, "s1")
		return kernel.Response{Message: kernel.Message{Content: "recovered"}}, nil
	})
	k, err := kernel.New(kernel.Config{Store: st, Tools: registry(t, write, read), Provider: prov})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Continue(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if during.Meta.Status != kernel.StatusRunning || during.Messages[len(during.Messages)-1].Role != kernel.RoleTool {
		t.Fatalf("while the model answered the repaired session was %s with a %s last; want running (resumable)",
			during.Meta.Status, during.Messages[len(during.Messages)-1].Role)
	}
	if during.Meta.Round != nil {
		t.Fatalf("the repair left the round open: %+v", during.Meta.Round)
	}
	got := map[string]kernel.Message{}
	for _, m := range checkHistory(t, st, "s1").Messages {
		if m.Role == kernel.RoleTool {
			got[m.ToolCallID] = m
		}
	}
	if c := got["c1"]; c.Content != kernel.Interrupted || c.Approval == nil || c.Approval.By != "alice" {
		t.Errorf("the call with an intent: %q (approval %+v); want %q with alice's approval", c.Content, c.Approval, kernel.Interrupted)
	}
	if c := got["c2"].Content; !strings.HasPrefix(c, kernel.InterruptedNotRun) {
		t.Errorf("the side-effecting call without an intent: %q; want it did not run", c)
	}
	if c := got["c3"].Content; c != kernel.Interrupted {
		t.Errorf("the read-only call: %q; want %q", c, kernel.Interrupted)
	}
	if n := len(write.Calls()) + len(read.Calls()); n != 0 {
		t.Errorf("repair ran %d calls again", n)
	}
}

// failAfter is a store that fails every write after the first n: the
// process "dies" there, and what it stored is what a restart finds.
type failAfter struct {
	*memory.Store
	n int
}

func (s *failAfter) Commit(ctx context.Context, id string, step kernel.Step) error {
	if s.n == 0 {
		return errors.New("the process died")
	}
	s.n--
	return s.Store.Commit(ctx, id, step)
}

// TestApprovalConsumedByTheIntent: approving stores the call's intent,
// with the session running and the approval cleared, before the call
// runs. The process dies right after the call ran: the next owner finds
// no approval to grant again (it would run the call twice), resumes the
// run, and answers the call "may have run", with who approved it.
func TestApprovalConsumedByTheIntent(t *testing.T) {
	mem := memory.New()
	write := watcher("write", kernel.TierSideEffecting, mem)
	pol := &fakePolicy{effects: map[string]kernel.Effect{"write": kernel.EffectAsk}}
	k, err := kernel.New(kernel.Config{Store: mem, Tools: registry(t, write), Policy: pol,
		Provider: kerneltest.NewProvider(kerneltest.Calls("write", `{}`), kerneltest.Text("written, done"))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := k.Run(ctx, "", "write")
	if err != nil || res.StopReason != kernel.StopAwaitingApproval {
		t.Fatalf("run = %+v, %v", res, err)
	}
	dying := &failAfter{Store: mem, n: 1} // the intent is stored, the result is not
	kd, err := kernel.New(kernel.Config{Store: dying, Tools: registry(t, write), Policy: pol, Provider: kerneltest.NewProvider()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kd.With(kernel.RunOptions{Principal: "alice"}).Resolve(ctx, res.SessionID, true, ""); err == nil {
		t.Fatal("Resolve succeeded on a store that fails")
	}
	if len(write.seen) != 1 {
		t.Fatalf("the approved call ran %d times, want once", len(write.seen))
	}
	if se := write.seen[0]; se.Pending != nil || se.Meta.Status != kernel.StatusRunning || !hasIntent(se.Meta.Round, "c1") {
		t.Fatalf("when the approved call ran: pending %v, status %s, round %+v; want no pending approval, running, its intent", se.Pending, se.Meta.Status, se.Meta.Round)
	}
	if _, err := k.Resolve(ctx, res.SessionID, true, ""); !errors.Is(err, kernel.ErrNoApproval) {
		t.Fatalf("approving again = %v, want ErrNoApproval", err)
	}
	if _, err := k.Continue(ctx, res.SessionID); err != nil {
		t.Fatal(err)
	}
	if len(write.seen) != 1 {
		t.Fatalf("the approved call ran %d times, want once", len(write.seen))
	}
	se := checkHistory(t, mem, res.SessionID)
	if m := se.Messages[2]; m.Content != kernel.Interrupted || m.Approval == nil || m.Approval.By != "alice" || !m.Approval.Approved {
		t.Fatalf("the approved call's answer: %+v", m)
	}
}

func hasIntent(rd *kernel.Round, id string) bool {
	if rd == nil {
		return false
	}
	for _, in := range rd.Started {
		if in.CallID == id {
			return true
		}
	}
	return false
}

// failResults is a store whose commit of a step carrying a tool result
// fails once, as a database that went away between the call and its
// result would: every other commit goes through.
type failResults struct {
	kernel.Store
	failed bool
}

func (s *failResults) Commit(ctx context.Context, id string, step kernel.Step) error {
	for _, m := range step.Messages {
		if m.Role == kernel.RoleTool && !s.failed {
			s.failed = true
			return errors.New("the database went away")
		}
	}
	return s.Store.Commit(ctx, id, step)
}

// TestFailedRunAnswersItsOpenCalls: a side-effecting call ran, but its
// result could not be stored (the store failed, the lease held): the run
// fails, and the session it leaves failed answers the call (may have run,
// as repair would) instead of ending with a call that has no result, which
// would read as if nothing ran until the next run repaired it. The crash
// campaign on PostgreSQL found such sessions after a database restart
// (cmd/kernel, TestReplicaCrashCampaign).
func TestFailedRunAnswersItsOpenCalls(t *testing.T) {
	st := &failResults{Store: memory.New()}
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	k, err := kernel.New(kernel.Config{Store: st, Tools: registry(t, write),
		Provider: kerneltest.NewProvider(kerneltest.Calls("write", `{}`), kerneltest.Text("done"))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "go")
	if err == nil || !strings.Contains(err.Error(), "the database went away") {
		t.Fatalf("run: %v, want the store's failure", err)
	}
	if n := len(write.Calls()); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	se := checkHistory(t, st, res.SessionID) // every call answered once
	if se.Meta.Status != kernel.StatusFailed {
		t.Fatalf("session is %s, want failed", se.Meta.Status)
	}
	last := se.Messages[len(se.Messages)-1]
	if last.Role != kernel.RoleTool || last.ToolCallID != "c1" || !last.IsError || !strings.HasPrefix(last.Content, kernel.Interrupted) {
		t.Fatalf("the session ends with %+v, want call c1 answered %q", last, kernel.Interrupted)
	}
	if se.Meta.Round != nil {
		t.Fatalf("the answered round is still open: %+v", se.Meta.Round)
	}
}
