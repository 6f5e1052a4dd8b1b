package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/queue"
)

// contextBudget stops a run with a wrap-up once the context passes a
// fraction, as a policy budget on context.fraction does.
type contextBudget struct {
	kernel.Policy
	limit float64
	seen  []float64
}

func (p *contextBudget) Surface(_ context.Context, _ *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	return tools
}
func (p *contextBudget) Decide(context.Context, *kernel.State, *kernel.Call) kernel.Decision {
	return kernel.Decision{Effect: kernel.EffectAllow}
}
func (p *contextBudget) Budget(_ context.Context, st *kernel.State, _ kernel.BudgetPhase) kernel.BudgetVerdict {
	p.seen = append(p.seen, st.Context.Fraction)
	if st.Context.Fraction > p.limit {
		return kernel.BudgetVerdict{Stop: &kernel.BudgetNotice{ID: "context", Message: "context is filling up", WrapUp: true}}
	}
	return kernel.BudgetVerdict{}
}

func TestContextBudgetWrapsUp(t *testing.T) {
	pol := &contextBudget{limit: 0.3}
	reg := kernel.NewRegistry()
	reg.Register(bigTool(4 << 10))
	h := newHarness(t, kernel.Config{ContextWindow: 8192, Policy: pol, Tools: reg, Context: kernel.ContextConfig{Compact: 1}},
		kerneltest.Calls("read_big", map[string]int{"n": 1}),
		kerneltest.Calls("read_big", map[string]int{"n": 2}),
		kerneltest.Calls("read_big", map[string]int{"n": 3}),
		kerneltest.Text("Wrapping up: files 1 and 2 hold the handlers."))
	res, err := h.k.Run(context.Background(), "", "read the files")
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := res.StopReason.IsBudget(); !ok || id != "context" || res.Output != "Wrapping up: files 1 and 2 hold the handlers." {
		t.Fatalf("stop = %s, output %q", res.StopReason, res.Output)
	}
	reqs := h.prov.Requests()
	last := reqs[len(reqs)-1]
	if len(last.Tools) != 0 {
		t.Fatal("the wrap-up turn offered tools")
	}
	if pol.seen[0] <= 0 || pol.seen[len(pol.seen)-1] <= 0.3 {
		t.Fatalf("policy saw fractions %v", pol.seen)
	}
}

// TestSteeringDeliveredAtBoundary queues a message while a tool runs: it is
// delivered after that tool round, before the next generation, once.
func TestSteeringDeliveredAtBoundary(t *testing.T) {
	q, err := queue.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sid string
	var queued queue.Entry
	reg := kernel.NewRegistry()
	reg.Register(kernel.NewTool(kernel.ToolSpec{Name: "work", Description: "w", Tier: kernel.TierReadOnly, Source: "test"},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			var err error
			queued, err = q.Add(ctx, sid, "stop: look in tests/ instead", queue.Steer)
			if err != nil {
				t.Error(err)
			}
			return kernel.Result{Content: "src/ listed"}, nil
		}))
	h := newHarness(t, kernel.Config{Inbox: q, Tools: reg, OnEvent: func(e kernel.Event) {
		if rs, ok := e.(kernel.RunStarted); ok {
			sid = rs.SessionID
		}
	}},
		kerneltest.Calls("work", map[string]any{}),
		kerneltest.Text("Looking in tests/ as you asked."))
	res, err := h.k.Run(context.Background(), "", "find the handler")
	if err != nil || res.StopReason != kernel.StopCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	second := h.prov.Requests()[1].Messages
	n := len(second)
	if second[n-1].Role != kernel.RoleUser || second[n-1].Content != "stop: look in tests/ instead" || second[n-2].Role != kernel.RoleTool {
		t.Fatalf("the steering message is not right after the tool round: %+v", second[n-2:])
	}
	s, _ := h.store.Load(context.Background(), sid)
	count := 0
	for _, m := range s.Messages {
		if m.Content == "stop: look in tests/ instead" {
			count++
		}
	}
	if count != 1 || len(s.Meta.Delivered) != 1 || s.Meta.Delivered[0] != queued.ID {
		t.Fatalf("delivered %d times, meta %v", count, s.Meta.Delivered)
	}
	if left, _ := q.List(context.Background(), sid); len(left) != 0 {
		t.Fatalf("still queued: %v", left)
	}
}

// TestScrubInput: Config.ScrubInput sees everything a person types before
// it is stored or sent: the prompt (and the title taken from it) and a
// steered message. Without it the secret reaches the store and the model.
func TestScrubInput(t *testing.T) {
	q, err := queue.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sid string
	reg := kernel.NewRegistry()
	reg.Register(kernel.NewTool(kernel.ToolSpec{Name: "work", Description: "w", Tier: kernel.TierReadOnly, Source: "test"},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			if _, err := q.Add(context.Background(), sid, "also try hunter2-SECRET", queue.Steer); err != nil {
				t.Error(err)
			}
			return kernel.Result{Content: "ok"}, nil
		}))
	scrub := func(s string) string { return strings.ReplaceAll(s, "hunter2-SECRET", "[REDACTED]") }
	h := newHarness(t, kernel.Config{Inbox: q, Tools: reg, ScrubInput: scrub, OnEvent: func(e kernel.Event) {
		if rs, ok := e.(kernel.RunStarted); ok {
			sid = rs.SessionID
			if strings.Contains(rs.Prompt, "SECRET") {
				t.Errorf("run.started carries the typed secret: %q", rs.Prompt)
			}
		}
	}},
		kerneltest.Calls("work", map[string]any{}),
		kerneltest.Text("done"))
	if _, err := h.k.Run(context.Background(), "", "log in with hunter2-SECRET"); err != nil {
		t.Fatal(err)
	}
	s, _ := h.store.Load(context.Background(), sid)
	if strings.Contains(s.Meta.Title, "SECRET") {
		t.Errorf("title %q", s.Meta.Title)
	}
	for _, m := range s.Messages {
		if strings.Contains(m.Content, "SECRET") {
			t.Errorf("stored %s message %q", m.Role, m.Content)
		}
	}
	for _, req := range h.prov.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "SECRET") {
				t.Errorf("sent the model %q", m.Content)
			}
		}
	}
}
