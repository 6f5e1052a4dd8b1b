package kernel_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/toolproto"
)

// TestWithRoutesEvents: two runs through With views of one Kernel send
// their events, the policy's and the tools' included, to their own sinks
// and none to the Kernel's.
func TestWithRoutesEvents(t *testing.T) {
	echo := kerneltest.EchoTool("echo")
	pol := &fakePolicy{effects: map[string]kernel.Effect{"echo": kernel.EffectAllow}}
	h := newHarness(t, kernel.Config{Tools: registry(t, echo), Policy: pol},
		kerneltest.Calls("echo", `{"text":"a"}`), kerneltest.Text("done a"))
	var mu sync.Mutex
	var mine []kernel.Event
	res, err := h.k.With(kernel.RunOptions{OnEvent: func(e kernel.Event) {
		mu.Lock()
		mine = append(mine, e)
		mu.Unlock()
	}}).Run(context.Background(), "", "go")
	if err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if len(h.events) != 0 {
		t.Fatalf("the Kernel's own sink got %d events, want none", len(h.events))
	}
	types := map[string]bool{}
	for _, e := range mine {
		types[e.Type()] = true
	}
	for _, want := range []string{"run.started", "policy.decision", "tool.started", "tool.completed", "run.completed"} {
		if !types[want] {
			t.Errorf("the view's sink has no %s event (got %v)", want, types)
		}
	}
}

// TestInterruptAndContinue: a run asked to stop stops at the next step
// boundary, keeps status running, and Continue finishes it without
// running a stored call again.
func TestInterruptAndContinue(t *testing.T) {
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	stop := make(chan struct{})
	var once sync.Once
	h := newHarness(t, kernel.Config{Tools: registry(t, write)}, kerneltest.Calls("write", `{"path":"a"}`), kerneltest.Text("finished"))
	res, err := h.k.With(kernel.RunOptions{Interrupt: stop, OnEvent: func(e kernel.Event) {
		if e.Type() == "tool.completed" {
			once.Do(func() { close(stop) }) // mid-run: the tool round is in flight
		}
	}}).Run(context.Background(), "", "write a")
	if err != nil || res.StopReason != kernel.StopInterrupted {
		t.Fatalf("run = %+v, %v; want stop reason interrupted", res, err)
	}
	sess := checkHistory(t, h.store, res.SessionID)
	if sess.Meta.Status != kernel.StatusRunning {
		t.Fatalf("status after interrupt = %s, want running (resumable)", sess.Meta.Status)
	}
	if last := sess.Messages[len(sess.Messages)-1]; last.Role != kernel.RoleTool || last.Content != "written" {
		t.Fatalf("last stored message = %+v, want the tool round's result", last)
	}
	res, err = h.k.With(kernel.RunOptions{}).Continue(context.Background(), res.SessionID)
	if err != nil || res.StopReason != kernel.StopCompleted || res.Output != "finished" {
		t.Fatalf("continue = %+v, %v", res, err)
	}
	if n := len(write.Calls()); n != 1 {
		t.Fatalf("write ran %d times, want once", n)
	}
	if _, err := h.k.Continue(context.Background(), res.SessionID); !errors.Is(err, kernel.ErrNothingToContinue) {
		t.Fatalf("continue a finished session = %v, want ErrNothingToContinue", err)
	}
}

// TestContinueAfterCrash: a session left running by a crash mid-round
// (the assistant's calls stored, no results) continues: the calls are
// answered as interrupted, not run again, and the model answers.
func TestContinueAfterCrash(t *testing.T) {
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	h := newHarness(t, kernel.Config{Tools: registry(t, write)}, kerneltest.Text("recovered"))
	ctx := context.Background()
	meta := kernel.SessionMeta{ID: "s1", Status: kernel.StatusRunning, Runs: 1, Turns: 1}
	if err := h.store.Commit(ctx, "s1", kernel.Step{Meta: meta, Messages: []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "write a"},
		{Seq: 2, Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "write", Arguments: `{"path":"a"}`}}},
	}}); err != nil {
		t.Fatal(err)
	}
	res, err := h.k.Continue(ctx, "s1")
	if err != nil || res.StopReason != kernel.StopCompleted || res.Output != "recovered" {
		t.Fatalf("continue = %+v, %v", res, err)
	}
	if n := len(write.Calls()); n != 0 {
		t.Fatalf("write ran %d times after the crash, want 0 (answered as interrupted)", n)
	}
	sess := checkHistory(t, h.store, "s1")
	if sess.Messages[2].Content != kernel.Interrupted || sess.Meta.Status != kernel.StatusIdle {
		t.Fatalf("after continue: %+v, status %s", sess.Messages[2], sess.Meta.Status)
	}
}

// TestPrincipalRecorded: who decided an approval is in the
// approval.resolved event.
func TestPrincipalRecorded(t *testing.T) {
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	pol := &fakePolicy{effects: map[string]kernel.Effect{"write": kernel.EffectAsk}}
	h := newHarness(t, kernel.Config{Tools: registry(t, write), Policy: pol},
		kerneltest.Calls("write", `{"path":"a"}`), kerneltest.Text("ok"))
	res, err := h.k.Run(context.Background(), "", "write")
	if err != nil || res.StopReason != kernel.StopAwaitingApproval {
		t.Fatalf("run = %+v, %v", res, err)
	}
	var got *kernel.ApprovalResolved
	_, err = h.k.With(kernel.RunOptions{Principal: "alice", OnEvent: func(e kernel.Event) {
		if ar, ok := e.(kernel.ApprovalResolved); ok {
			got = &ar
		}
	}}).Resolve(context.Background(), res.SessionID, true, "fine")
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.By != "alice" || !got.Approved || got.Note != "fine" {
		t.Fatalf("approval.resolved = %+v, want by alice", got)
	}
	// The session keeps it with the call's result.
	sess := checkHistory(t, h.store, res.SessionID)
	var rec *kernel.ApprovalRecord
	for _, m := range sess.Messages {
		if m.Role == kernel.RoleTool && m.ToolName == "write" {
			rec = m.Approval
		}
	}
	if rec == nil || rec.By != "alice" || !rec.Approved || rec.ID != res.Pending.ID {
		t.Fatalf("stored approval record = %+v", rec)
	}
}

// TestWithKeepsTheToolProtocol: a view made by With runs a model on the
// text tool protocol as its Kernel does. (Views once lost the protocol
// setup: the call the model wrote in its answer was never read, and the
// run ended with it as the answer.)
func TestWithKeepsTheToolProtocol(t *testing.T) {
	c := codecOf(t, toolproto.Hermes)
	answer := c.FormatCalls("", []toolproto.Call{{Name: "echo", Arguments: `{"text":"x"}`}})
	h := newHarness(t, textConfig(t, toolproto.Hermes, kernel.ToolProtocolText, kerneltest.EchoTool("echo")), raw(answer), raw("Done."))
	res, err := h.k.With(kernel.RunOptions{Principal: "ada"}).Run(context.Background(), "", "check")
	if err != nil || len(res.Calls) != 1 || res.Calls[0].Tool != "echo" || res.Output != "Done." {
		t.Fatalf("run through a view: %+v, %v", res, err)
	}
}

// TestCommitEndTakesTheRunsEnd: with RunOptions.CommitEnd, the run's last
// answer is committed through it, with the events that end the run
// (message.completed of the answer, run.completed), once; every other step
// goes through CommitStep; those events reach OnEvent only after
// CommitEnd returned, in its order, and no event of the run follows them.
func TestCommitEndTakesTheRunsEnd(t *testing.T) {
	echo := kerneltest.EchoTool("echo")
	pol := &fakePolicy{effects: map[string]kernel.Effect{"echo": kernel.EffectAllow}}
	h := newHarness(t, kernel.Config{Tools: registry(t, echo), Policy: pol},
		kerneltest.Calls("echo", `{"text":"a"}`), kerneltest.Text("done a"))
	var mu sync.Mutex
	var log []string // what happened, in order
	var ends [][]string
	var lastStep kernel.Step
	res, err := h.k.With(kernel.RunOptions{
		OnEvent: func(e kernel.Event) {
			mu.Lock()
			log = append(log, "event "+e.Type())
			mu.Unlock()
		},
		CommitStep: func(ctx context.Context, id string, step kernel.Step) error {
			mu.Lock()
			log = append(log, "step")
			mu.Unlock()
			return h.store.Commit(ctx, id, step)
		},
		CommitEnd: func(ctx context.Context, id string, step kernel.Step, events []kernel.Event) error {
			var types []string
			for _, e := range events {
				types = append(types, e.Type())
			}
			mu.Lock()
			log = append(log, "end")
			ends = append(ends, types)
			lastStep = step
			mu.Unlock()
			return h.store.Commit(ctx, id, step)
		},
	}).Run(context.Background(), "", "go")
	if err != nil || res.StopReason != kernel.StopCompleted || res.Output != "done a" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ends) != 1 || !slices.Equal(ends[0], []string{"message.completed", "run.completed"}) {
		t.Fatalf("CommitEnd took %v, want once [message.completed run.completed]", ends)
	}
	if n := len(lastStep.Messages); n == 0 || lastStep.Messages[n-1].Content != "done a" || lastStep.Meta.Status != kernel.StatusIdle {
		t.Fatalf("CommitEnd's step = %+v, want the last answer with status idle", lastStep)
	}
	i := slices.Index(log, "end")
	if want := []string{"end", "event message.completed", "event run.completed"}; !slices.Equal(log[i:], want) {
		t.Fatalf("from the last commit on: %v, want %v (the end's events after it, nothing else)", log[i:], want)
	}
	// Before it: the first answer's message.completed (it had a call),
	// no run.completed.
	if before := strings.Join(log[:i], ","); strings.Count(before, "message.completed") != 1 || strings.Contains(before, "run.completed") {
		t.Fatalf("before the last commit: %v", log[:i])
	}
	sess := checkHistory(t, h.store, res.SessionID)
	if last := sess.Messages[len(sess.Messages)-1]; last.Content != "done a" || sess.Meta.Status != kernel.StatusIdle {
		t.Fatalf("stored: last %+v, status %s", last, sess.Meta.Status)
	}
}

// TestCommitEndFails: when CommitEnd fails, nothing of the run's end is
// emitted (no message.completed of the answer, no run.completed): the run
// fails, RunFailed says so, and the stored history has no answer.
func TestCommitEndFails(t *testing.T) {
	h := newHarness(t, kernel.Config{}, kerneltest.Text("the answer"))
	var mu sync.Mutex
	var types []string
	boom := errors.New("disk on fire")
	res, err := h.k.With(kernel.RunOptions{
		OnEvent: func(e kernel.Event) {
			mu.Lock()
			types = append(types, e.Type())
			mu.Unlock()
		},
		CommitStep: func(ctx context.Context, id string, step kernel.Step) error { return h.store.Commit(ctx, id, step) },
		CommitEnd: func(context.Context, string, kernel.Step, []kernel.Event) error {
			return boom
		},
	}).Run(context.Background(), "", "go")
	if !errors.Is(err, boom) || res == nil || res.StopReason != kernel.StopError {
		t.Fatalf("run = %+v, %v; want the commit's error", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(types, "run.completed") || slices.Contains(types, "message.completed") {
		t.Fatalf("events %v: the end of a run whose last step was not stored was emitted", types)
	}
	if types[len(types)-1] != "run.failed" {
		t.Fatalf("last event %s, want run.failed (%v)", types[len(types)-1], types)
	}
	sess := checkHistory(t, h.store, res.SessionID)
	for _, m := range sess.Messages {
		if m.Content == "the answer" {
			t.Fatalf("the answer was stored: %+v", sess.Messages)
		}
	}
	if sess.Meta.Status != kernel.StatusFailed {
		t.Fatalf("status %s, want failed", sess.Meta.Status)
	}
}
