package kernel_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// doubling reports twice the kernel's estimate as the prompt tokens, as a
// model whose tokenizer splits finer than 4 bytes a token would.
type doubling struct{ turns int }

func (d *doubling) Stream(_ context.Context, req kernel.Request, _ func(kernel.Delta)) (kernel.Response, error) {
	d.turns++
	u := kernel.Usage{InputTokens: int64(2 * kernel.CountRequest(nil, req.Messages, req.Tools)), OutputTokens: 5}
	if d.turns < 3 {
		return kernel.Response{Message: kernel.Message{ToolCalls: []kernel.ToolCall{{ID: "c", Name: "read_big", Arguments: `{"n":1}`}}}, Usage: u}, nil
	}
	return kernel.Response{Message: kernel.Message{Content: "done"}, Usage: u}, nil
}

type usedRecorder struct {
	contextBudget
	used []int
}

func (p *usedRecorder) Budget(ctx context.Context, st *kernel.State, ph kernel.BudgetPhase) kernel.BudgetVerdict {
	p.used = append(p.used, st.Context.Used)
	return kernel.BudgetVerdict{}
}

func TestCalibrationFromUsage(t *testing.T) {
	reg := kernel.NewRegistry()
	reg.Register(bigTool(2000))
	pol := &usedRecorder{}
	k, err := kernel.New(kernel.Config{Provider: &doubling{}, Store: memory.New(), Tools: reg, Policy: pol, Model: "local-x", ContextWindow: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if c := k.Calibration("local-x"); c != 1 {
		t.Fatalf("calibration before any usage = %v", c)
	}
	if _, err := k.Run(context.Background(), "", "read"); err != nil {
		t.Fatal(err)
	}
	if c := k.Calibration("local-x"); math.Abs(c-2) > 0.05 {
		t.Fatalf("calibration = %v, want 2", c)
	}
	// Before the first generation the estimate is raw; after it, doubled.
	if len(pol.used) < 3 || float64(pol.used[2]) < 1.8*float64(pol.used[0]) {
		t.Fatalf("context.used over the run: %v", pol.used)
	}
}

// lossyInbox forgets to mark messages delivered, as a process killed right
// after the commit would.
type lossyInbox struct{ *queue.Dir }

func (lossyInbox) Delivered(context.Context, string, []string) error { return nil }

func TestSteeringExactlyOnceAfterCrash(t *testing.T) {
	dir := t.TempDir()
	store := memory.New()
	q1, _ := queue.Open(dir, nil)
	prov := kerneltest.NewProvider(kerneltest.Text("one"), kerneltest.Text("two"), kerneltest.Text("three"), kerneltest.Text("four"))
	k1, _ := kernel.New(kernel.Config{Provider: prov, Store: store, Inbox: lossyInbox{q1}})
	ctx := context.Background()
	res, err := k1.Run(ctx, "", "start")
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	if _, err := q1.Add(ctx, sid, "use the tests dir", queue.Steer); err != nil {
		t.Fatal(err)
	}
	if _, err := k1.Run(ctx, sid, "go on"); err != nil {
		t.Fatal(err)
	}
	// A new process: the claim is still there and offered again.
	q2, _ := queue.Open(dir, nil)
	k2, _ := kernel.New(kernel.Config{Provider: prov, Store: store, Inbox: q2})
	if _, err := k2.Run(ctx, sid, "and then?"); err != nil {
		t.Fatal(err)
	}
	s, _ := store.Load(ctx, sid)
	n := 0
	for _, m := range s.Messages {
		if m.Content == "use the tests dir" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("delivered %d times", n)
	}
	last := prov.Requests()[2].Messages
	b, _ := json.Marshal(last)
	if strings.Count(string(b), "use the tests dir") != 1 {
		t.Fatalf("the model saw it %d times", strings.Count(string(b), "use the tests dir"))
	}
	if left, _ := q2.Take(ctx, sid); len(left) != 0 {
		t.Fatalf("claim not cleared: %+v", left)
	}
}

// TestTrimKeepsHeadAndTail: a tool result over the limit reaches the model
// cut, with a marker, the store keeps it whole, and the call stays paired.
func TestTrimKeepsHeadAndTail(t *testing.T) {
	reg := kernel.NewRegistry()
	reg.Register(bigTool(60000))
	h := newHarness(t, kernel.Config{ContextWindow: 16384, Tools: reg},
		kerneltest.Calls("read_big", map[string]int{"n": 7}),
		kerneltest.Text("ok"))
	res, err := h.k.Run(context.Background(), "", "read it")
	if err != nil {
		t.Fatal(err)
	}
	second := h.prov.Requests()[1].Messages
	tool := second[len(second)-1]
	if tool.Role != kernel.RoleTool || !strings.Contains(tool.Content, "bytes trimmed by the kernel") ||
		!strings.HasPrefix(tool.Content, "line 0 of file 7") || len(tool.Content) > 10000 {
		t.Fatalf("tool result as sent: %d bytes: %.80s", len(tool.Content), tool.Content)
	}
	s, _ := h.store.Load(context.Background(), res.SessionID)
	for _, m := range s.Messages {
		if m.Role == kernel.RoleTool && len(m.Content) < 60000 {
			t.Fatal("the store lost the full result")
		}
	}
}
