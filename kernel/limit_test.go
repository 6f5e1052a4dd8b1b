package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	toolpkg "github.com/agentkernel/agentkernel/tool"
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

// TestToolQueueWaitIsBoundedByQueueLimit: with one slot held by another
// run's call, a call whose queue limit passes in line fails as a timeout
// that names both limits, though its own timeout is far away, and its
// tool never runs.
func TestToolQueueWaitIsBoundedByQueueLimit(t *testing.T) {
	hold := kerneltest.NewRecorder("hold", kernel.TierReadOnly, "held")
	hold.ToolSpec.Timeout = time.Minute
	hold.Block = make(chan struct{})
	quick := kerneltest.NewRecorder("quick", kernel.TierReadOnly, "quick")
	quick.ToolSpec.Timeout = 20 * time.Second // far beyond the queue limit
	// The provider plays its replies in order across both runs: the first
	// run's call, the whole second run, then the first run's answer.
	h := newHarness(t, kernel.Config{Tools: registry(t, hold, quick), MaxConcurrentTools: 1, ToolQueueTimeout: 200 * time.Millisecond},
		kerneltest.Calls("hold", "{}"), kerneltest.Calls("quick", "{}"), kerneltest.Text("second done"), kerneltest.Text("first done"))

	first := make(chan error, 1)
	go func() {
		_, err := h.k.Run(context.Background(), "", "hold the slot")
		first <- err
	}()
	waitCalled(t, hold)
	res, err := h.k.Run(context.Background(), "", "wait in line")
	close(hold.Block)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeError ||
		!strings.Contains(res.Calls[0].Error, "tool timed out after 200ms (limits.tool_queue_timeout) waiting for one of the kernel's 1 tool slots (limits.max_concurrent_tools)") {
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

// TestToolQueueWaitIsNotChargedToTimeout: a call that waits in line for
// the kernel's slot longer than its own timeout still runs and succeeds:
// its timeout starts when it leaves the line.
func TestToolQueueWaitIsNotChargedToTimeout(t *testing.T) {
	hold := kerneltest.NewRecorder("hold", kernel.TierReadOnly, "held")
	hold.ToolSpec.Timeout = time.Minute
	hold.Block = make(chan struct{})
	quick := kerneltest.NewRecorder("quick", kernel.TierReadOnly, "quick")
	quick.ToolSpec.Timeout = 100 * time.Millisecond
	h := newHarness(t, kernel.Config{Tools: registry(t, hold, quick), MaxConcurrentTools: 1, ToolQueueTimeout: time.Hour},
		kerneltest.Calls("hold", "{}"), kerneltest.Calls("quick", "{}"), kerneltest.Text("second done"), kerneltest.Text("first done"))

	first := make(chan error, 1)
	go func() {
		_, err := h.k.Run(context.Background(), "", "hold the slot")
		first <- err
	}()
	waitCalled(t, hold)
	// Release the slot only after three of quick's timeouts have passed
	// with quick in line.
	go func() {
		time.Sleep(3 * quick.ToolSpec.Timeout)
		close(hold.Block)
	}()
	res, err := h.k.Run(context.Background(), "", "wait in line")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK {
		t.Fatalf("calls %+v, want one that waited in line and succeeded", res.Calls)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestToolQueueInTheTool: a tool that reports its own queue (tool.Queue,
// as the WASM host does) has the kernel's queue limit as its deadline
// while it waits there, however long past its own timeout, and its own
// timeout from Started on; a wait past the queue limit fails as a
// timeout naming limits.tool_queue_timeout.
func TestToolQueueInTheTool(t *testing.T) {
	const timeout = 100 * time.Millisecond
	t.Run("not charged", func(t *testing.T) {
		var problems []string
		queuing := kernel.NewTool(kernel.ToolSpec{Name: "queuing", Tier: kernel.TierReadOnly, Timeout: timeout},
			func(ctx context.Context, args json.RawMessage) (kernel.Result, error) {
				start := toolpkg.Queue(ctx)
				if d, _ := ctx.Deadline(); time.Until(d) < 30*time.Minute {
					problems = append(problems, fmt.Sprintf("in line, the deadline is %s away, want the queue limit's hour", time.Until(d)))
				}
				time.Sleep(3 * timeout)
				if ctx.Err() != nil {
					problems = append(problems, fmt.Sprintf("in line past the timeout, the context ended: %v", context.Cause(ctx)))
				}
				start()
				if d, _ := ctx.Deadline(); time.Until(d) > timeout {
					problems = append(problems, fmt.Sprintf("started, the deadline is %s away, want at most the tool's %s", time.Until(d), timeout))
				}
				return kernel.Result{Content: "ran"}, nil
			})
		h := newHarness(t, kernel.Config{Tools: registry(t, queuing), ToolQueueTimeout: time.Hour},
			kerneltest.Calls("queuing", "{}"), kerneltest.Text("done"))
		res, err := h.k.Run(context.Background(), "", "go")
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) > 0 || len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK {
			t.Fatalf("problems %q, calls %+v", problems, res.Calls)
		}
	})
	t.Run("queue limit", func(t *testing.T) {
		queuing := kernel.NewTool(kernel.ToolSpec{Name: "queuing", Tier: kernel.TierReadOnly, Timeout: 20 * time.Second},
			func(ctx context.Context, args json.RawMessage) (kernel.Result, error) {
				toolpkg.Queue(ctx)
				<-ctx.Done()
				return kernel.Result{}, ctx.Err()
			})
		h := newHarness(t, kernel.Config{Tools: registry(t, queuing), ToolQueueTimeout: timeout},
			kerneltest.Calls("queuing", "{}"), kerneltest.Text("done"))
		res, err := h.k.Run(context.Background(), "", "go")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeError ||
			!strings.Contains(res.Calls[0].Error, "after 100ms (limits.tool_queue_timeout) waiting in line to start") {
			t.Fatalf("calls %+v, want a timeout in line", res.Calls)
		}
	})
}

func waitCalled(t *testing.T, r *kerneltest.Recorder) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); len(r.Calls()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s was never called", r.ToolSpec.Name)
		}
	}
}
