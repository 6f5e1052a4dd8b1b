package kernel_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// A tool learns the session its call runs in from its context, as the
// kernel set it from the run (id, labels, agent); a caller's own context
// value cannot stand in for it, and a tool called outside a run learns
// nothing.
func TestCallSession(t *testing.T) {
	var mu sync.Mutex
	var got []kernel.CallSessionInfo
	var oks []bool
	probe := kernel.NewTool(kernel.ToolSpec{Name: "probe", Tier: kernel.TierReadOnly, Source: "test"},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			info, ok := kernel.CallSession(ctx)
			mu.Lock()
			got, oks = append(got, info), append(oks, ok)
			mu.Unlock()
			if ok {
				info.Labels["owner"] = "mallory" // a copy: the session's labels stay
			}
			return kernel.Result{Content: "ok"}, nil
		})
	h := newHarness(t, kernel.Config{Tools: registry(t, probe)},
		kerneltest.Calls("probe", `{}`, "probe", `{}`), kerneltest.Text("done"))
	ctx := context.Background()
	now := time.Now().UTC()
	meta := kernel.SessionMeta{ID: "s-alice", Status: kernel.StatusIdle, Created: now, Updated: now,
		Labels: map[string]string{"owner": "alice"}}
	if err := h.store.Commit(ctx, meta.ID, kernel.Step{Meta: meta}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.k.Run(ctx, meta.ID, "go"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("probe ran %d times, want 2", len(got))
	}
	for i, info := range got {
		if !oks[i] || info.SessionID != "s-alice" || info.Labels["owner"] != "mallory" && info.Labels["owner"] != "alice" {
			t.Fatalf("call %d: CallSession = %+v, %v; want session s-alice with label owner", i, info, oks[i])
		}
		if info.Agent.Name != kernel.DefaultAgentName || info.Agent.Depth != 0 {
			t.Fatalf("call %d: agent %+v, want the default agent at depth 0", i, info.Agent)
		}
	}
	sess, err := h.store.Load(ctx, meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Meta.Labels["owner"] != "alice" {
		t.Fatalf("the tool changed the session's labels: %v", sess.Meta.Labels)
	}

	// Outside a run: nothing, whatever the caller put in its context.
	type fake struct{}
	forged := context.WithValue(ctx, fake{}, kernel.CallSessionInfo{SessionID: "s-alice"})
	if info, ok := kernel.CallSession(forged); ok {
		t.Fatalf("CallSession outside a run = %+v, true", info)
	}
}
