package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// gauge counts the tool executions running at once across every tool that
// shares it.
type gauge struct{ now, peak atomic.Int32 }

type gaugedTool struct {
	spec kernel.ToolSpec
	g    *gauge
}

func (t *gaugedTool) Spec() kernel.ToolSpec { return t.spec }

func (t *gaugedTool) Call(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
	n := t.g.now.Add(1)
	defer t.g.now.Add(-1)
	for p := t.g.peak.Load(); n > p && !t.g.peak.CompareAndSwap(p, n); p = t.g.peak.Load() {
	}
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
		return kernel.Result{}, ctx.Err()
	}
	return kernel.Result{Content: "ok"}, nil
}

// TestMaxConcurrentTools: eight read-only calls of two tools from two
// sources, which the loop starts together, never run more than the
// kernel-wide limit at once, and all succeed: the others wait their turn.
func TestMaxConcurrentTools(t *testing.T) {
	g := &gauge{}
	a := &gaugedTool{spec: kernel.ToolSpec{Name: "a", Description: "a", Tier: kernel.TierReadOnly, Source: "wasm:x", Timeout: time.Minute}, g: g}
	b := &gaugedTool{spec: kernel.ToolSpec{Name: "b", Description: "b", Tier: kernel.TierReadOnly, Source: "plugin:y", Timeout: time.Minute}, g: g}
	h := newHarness(t, kernel.Config{Tools: registry(t, a, b), MaxConcurrentTools: 2},
		kerneltest.Calls("a", "{}", "b", "{}", "a", "{}", "b", "{}", "a", "{}", "b", "{}", "a", "{}", "b", "{}"),
		kerneltest.Text("done"))
	res, err := h.k.Run(context.Background(), "", "go")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 8 {
		t.Fatalf("%d calls recorded, want 8", len(res.Calls))
	}
	for _, c := range res.Calls {
		if c.Outcome != kernel.OutcomeOK {
			t.Fatalf("call %s: %s %s", c.Tool, c.Outcome, c.Error)
		}
	}
	if p := g.peak.Load(); p > 2 || p < 1 {
		t.Fatalf("%d tool executions ran at once, want at most the limit of 2", p)
	}
}

// TestToolQueueWaitCountsAgainstDeadline: with one slot held by another
// run's call, a call whose deadline passes in the queue fails as a timeout
// that names the limit, and its tool never runs.
func TestToolQueueWaitCountsAgainstDeadline(t *testing.T) {
	hold := kerneltest.NewRecorder("hold", kernel.TierReadOnly, "held")
	hold.ToolSpec.Timeout = time.Minute
	hold.Block = make(chan struct{})
	quick := kerneltest.NewRecorder("quick", kernel.TierReadOnly, "quick")
	quick.ToolSpec.Timeout = 200 * time.Millisecond
	// The provider plays its replies in order across both runs: the first
	// run's call, the whole second run, then the first run's answer.
	h := newHarness(t, kernel.Config{Tools: registry(t, hold, quick), MaxConcurrentTools: 1},
		kerneltest.Calls("hold", "{}"), kerneltest.Calls("quick", "{}"), kerneltest.Text("second done"), kerneltest.Text("first done"))

	first := make(chan error, 1)
	go func() {
		_, err := h.k.Run(context.Background(), "", "hold the slot")
		first <- err
	}()
	for deadline := time.Now().Add(time.Minute); len(hold.Calls()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first run's call never started")
		}
	}
	res, err := h.k.Run(context.Background(), "", "wait in line")
	close(hold.Block)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeError ||
		!strings.Contains(res.Calls[0].Error, "tool timed out after 200ms waiting for one of the kernel's 1 tool slots (limits.max_concurrent_tools)") {
		t.Fatalf("calls %+v, want one that timed out in the queue", res.Calls)
	}
	if n := len(quick.Calls()); n != 0 {
		t.Fatalf("the queued tool ran %d times, want 0", n)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := len(hold.Calls()); n != 1 {
		t.Fatalf("hold ran %d times", n)
	}
}
