package memory_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

func TestConformance(t *testing.T) {
	kerneltest.TestStore(t, func(t *testing.T) kernel.Store { return memory.New() })
}

func TestEventLogConformance(t *testing.T) {
	kerneltest.TestEventLog(t, func(t *testing.T) kernel.Store { return memory.New() })
}

// TestCommitAppendsInPlace: the steps of a run append to the session's
// history in place. A new session's history has room for a prompt and a
// few turns; append's own growth would reallocate it at the 2nd, 3rd and
// 5th message.
func TestCommitAppendsInPlace(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	steps := make([]kernel.Step, 8)
	for i := range steps {
		steps[i] = kernel.Step{Messages: []kernel.Message{{Seq: uint64(i + 1), Role: kernel.RoleUser, Content: "x"}}, Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}
	}
	if err := s.Commit(ctx, "s", steps[0]); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, st := range steps[1:] {
		if err := s.Commit(ctx, "s", st); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n != 0 {
		t.Fatalf("7 one-message commits to a new session allocated %d times; the history should have had room", n)
	}
	got, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 8 || got.Messages[7].Seq != 8 || got.Meta.LastSeq != 8 {
		t.Fatalf("history of %d messages, last seq %d", len(got.Messages), got.Meta.LastSeq)
	}
}
