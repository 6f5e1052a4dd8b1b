package memory_test

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// TestLoadHeadCopies: what LoadHead returns is the caller's (the
// conformance suite, TestConformance/LoadHead, holds it to Load minus the
// messages): changing its labels or its pending approval does not change
// the stored session.
func TestLoadHeadCopies(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	a := &kernel.Approval{ID: "a1", SessionID: "s", Call: kernel.ToolCall{ID: "c1", Name: "write_file"}}
	if err := s.Commit(ctx, "s", kernel.Step{Pending: a, Meta: kernel.SessionMeta{Status: kernel.StatusAwaitingApproval, Labels: map[string]string{"owner": "alice"}}}); err != nil {
		t.Fatal(err)
	}
	h, err := s.LoadHead(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	h.Meta.Labels["owner"] = "mallory"
	h.Pending.ID = "forged"
	again, err := s.LoadHead(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if again.Meta.Labels["owner"] != "alice" || again.Pending.ID != "a1" || again.Messages != nil {
		t.Fatalf("LoadHead after its answer was changed = %+v, want the stored head unchanged", again)
	}
}
