package kernel_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

type obsKey struct{}

// recObserver records what the kernel tells an observer.
type recObserver struct {
	mu      sync.Mutex
	infos   []kernel.RunInfo
	events  []string
	commits int
	ends    []*kernel.RunResult
}

func (o *recObserver) observe(ctx context.Context, info kernel.RunInfo) (context.Context, kernel.RunObserver) {
	o.mu.Lock()
	o.infos = append(o.infos, info)
	o.mu.Unlock()
	return context.WithValue(ctx, obsKey{}, info.SessionID), o
}

func (o *recObserver) Event(e kernel.Event) {
	o.mu.Lock()
	o.events = append(o.events, e.Type())
	o.mu.Unlock()
}

func (o *recObserver) Committed(d time.Duration, err error) {
	o.mu.Lock()
	o.commits++
	o.mu.Unlock()
}

func (o *recObserver) End(res *kernel.RunResult, err error) {
	o.mu.Lock()
	o.ends = append(o.ends, res)
	o.mu.Unlock()
}

// ctxTool reports whether the observer's context reached it.
type ctxTool struct{ seen chan any }

func (t *ctxTool) Spec() kernel.ToolSpec {
	return kernel.ToolSpec{Name: "probe", Description: "probe", Schema: json.RawMessage(`{"type":"object"}`), Tier: kernel.TierSideEffecting}
}

func (t *ctxTool) Call(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
	t.seen <- ctx.Value(obsKey{})
	return kernel.Result{Content: "ok"}, nil
}

// ctxProvider reports whether the observer's context reached the model call.
type ctxProvider struct {
	kernel.Provider
	seen []any
}

func (p *ctxProvider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	p.seen = append(p.seen, ctx.Value(obsKey{}))
	return p.Provider.Stream(ctx, req, emit)
}

// TestObserveSeesTheWholeRun: the observer gets every event of a run (the
// policy's and the tool's included, beside OnEvent), every store write,
// the end with the result, and its context reaches the model call, the
// hooks and the tool; an approval's run carries the pending approval.
func TestObserveSeesTheWholeRun(t *testing.T) {
	probe := &ctxTool{seen: make(chan any, 4)}
	pol := &fakePolicy{effects: map[string]kernel.Effect{"probe": kernel.EffectAsk}}
	o := &recObserver{}
	var hookSaw []any
	hook := func(next kernel.Handler) kernel.Handler {
		return kernel.HandlerFunc(func(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
			hookSaw = append(hookSaw, ctx.Value(obsKey{}))
			return next.Handle(ctx, c)
		})
	}
	prov := &ctxProvider{Provider: kerneltest.NewProvider(kerneltest.Calls("probe", `{}`), kerneltest.Text("done"))}
	var onEvent []kernel.Event
	k, err := kernel.New(kernel.Config{Provider: prov, Store: memory.New(), Model: "m", Tools: registry(t, probe), Policy: pol,
		Hooks: []kernel.Hook{hook}, Observe: o.observe, OnEvent: func(e kernel.Event) { onEvent = append(onEvent, e) }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "go")
	if err != nil || res.StopReason != kernel.StopAwaitingApproval {
		t.Fatalf("run = %+v, %v", res, err)
	}
	res, err = k.Resolve(context.Background(), res.SessionID, true, "")
	if err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatalf("resolve = %+v, %v", res, err)
	}
	if got := <-probe.seen; got != res.SessionID {
		t.Errorf("the tool's context carries %v, want the observer's value %s", got, res.SessionID)
	}
	for i, v := range append(prov.seen, hookSaw...) {
		if v != res.SessionID {
			t.Errorf("call %d: the model call or hook context carries %v, want %s", i, v, res.SessionID)
		}
	}
	if len(o.infos) != 2 || !o.infos[0].NewSession || o.infos[1].Pending == nil || !o.infos[1].Resumed {
		t.Fatalf("run infos = %+v; want a new session, then a resumed run with its pending approval", o.infos)
	}
	if len(o.ends) != 2 || o.ends[1] == nil || o.ends[1].StopReason != kernel.StopCompleted {
		t.Fatalf("ends = %v, want two, the last completed", o.ends)
	}
	want := map[string]bool{"run.started": true, "policy.decision": true, "approval.required": true, "approval.resolved": true, "tool.completed": true, "run.completed": true}
	for _, e := range o.events {
		delete(want, e)
	}
	if len(want) > 0 {
		t.Errorf("the observer missed %v (got %v)", want, o.events)
	}
	if len(o.events) != len(onEvent) {
		t.Errorf("the observer got %d events, OnEvent %d: want the same stream", len(o.events), len(onEvent))
	}
	if o.commits < 4 {
		t.Errorf("the observer saw %d store writes, want one per step (at least 4)", o.commits)
	}
}

// TestObserveDirectCalls: each direct call (kernel mcp serve) is observed
// on its own, marked Direct, and its events go to the observer.
func TestObserveDirectCalls(t *testing.T) {
	o := &recObserver{}
	h := newHarness(t, kernel.Config{Tools: registry(t, kerneltest.EchoTool("echo")), Observe: o.observe})
	ds, err := h.k.OpenDirect(context.Background(), "client", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ds.Call(context.Background(), "echo", json.RawMessage(`{"text":"x"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(o.infos) != 2 || !o.infos[0].Direct || o.infos[0].SessionID != ds.ID() || len(o.ends) != 2 {
		t.Fatalf("infos %+v, ends %d: want two direct calls of %s observed and ended", o.infos, len(o.ends), ds.ID())
	}
	n := 0
	for _, e := range o.events {
		if e == "tool.completed" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the observer saw %d tool.completed events, want 2 (%v)", n, o.events)
	}
}
