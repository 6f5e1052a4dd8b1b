package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// The memory store keeps the kernel's history itself (Step.History), so
// nothing the kernel does after a commit may write a committed message.
// These tests hold the two places that wrote into the history's array
// again: a direct session, which cuts its history back between calls, and
// the rewind after a failed commit.

// TestDirectSessionCallsStayStored: every call of a direct session stays
// stored as it was answered, though the session keeps no history between
// calls.
func TestDirectSessionCallsStayStored(t *testing.T) {
	h := newHarness(t, kernel.Config{Tools: registry(t, kerneltest.EchoTool("echo")), SystemPrompt: "be brief"})
	ctx := context.Background()
	ds, err := h.k.OpenDirect(ctx, "client", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := ds.Call(ctx, "echo", json.RawMessage(fmt.Sprintf(`{"text":"call %d"}`, i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	s, err := h.store.Load(ctx, ds.ID())
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for i, m := range s.Messages {
		if m.Seq != uint64(i+1) {
			t.Fatalf("message %d has seq %d: %+v", i, m.Seq, m)
		}
		if m.Role == kernel.RoleTool {
			results = append(results, m.Content)
		}
	}
	if fmt.Sprint(results) != "[call 0 call 1 call 2]" {
		t.Fatalf("stored results %q, want each call's own", results)
	}
}

// tookThenFailed stores a step and then reports a failure, once, for the
// step that holds an assistant message: as a front end whose store took
// the step and which then failed.
type tookThenFailed struct {
	*memory.Store
	failed bool
}

func (s *tookThenFailed) Commit(ctx context.Context, id string, step kernel.Step) error {
	if err := s.Store.Commit(ctx, id, step); err != nil {
		return err
	}
	if !s.failed && len(step.Messages) == 1 && step.Messages[0].Role == kernel.RoleAssistant {
		s.failed = true
		return errors.New("the front end failed after the store took the step")
	}
	return nil
}

// TestFailedCommitLeavesTheStoredStepAlone: when a commit fails after the
// store took the step, the kernel cuts its history back without writing
// over the messages the store holds.
func TestFailedCommitLeavesTheStoredStepAlone(t *testing.T) {
	store := &tookThenFailed{Store: memory.New()}
	k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(kerneltest.Text("the answer")), Store: store, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := k.Run(ctx, "", "the question")
	if err == nil || !store.failed {
		t.Fatalf("run: %v (failed %v), want the commit's failure", err, store.failed)
	}
	s, err := store.Load(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) < 2 {
		t.Fatalf("%d messages stored, want the prompt and the answer", len(s.Messages))
	}
	if m := s.Messages[0]; m.Seq != 1 || m.Role != kernel.RoleUser || m.Content != "the question" {
		t.Fatalf("message 1: %+v", m)
	}
	if m := s.Messages[1]; m.Seq != 2 || m.Role != kernel.RoleAssistant || m.Content != "the answer" {
		t.Fatalf("message 2 was written over after the store took it: %+v", m)
	}
}
