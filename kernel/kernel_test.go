package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// harness is a kernel over a memory store with recorded events.
type harness struct {
	k      *kernel.Kernel
	store  *memory.Store
	prov   *kerneltest.Provider
	mu     sync.Mutex
	events []kernel.Event
}

func newHarness(t *testing.T, cfg kernel.Config, replies ...kerneltest.Reply) *harness {
	t.Helper()
	h := &harness{store: memory.New(), prov: kerneltest.NewProvider(replies...)}
	cfg.Provider, cfg.Store = h.prov, h.store
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	user := cfg.OnEvent
	cfg.OnEvent = func(e kernel.Event) {
		h.mu.Lock()
		h.events = append(h.events, e)
		h.mu.Unlock()
		if user != nil {
			user(e)
		}
	}
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.k = k
	return h
}

func registry(t *testing.T, tools ...kernel.Tool) *kernel.Registry {
	t.Helper()
	r := kernel.NewRegistry()
	if err := r.Register(tools...); err != nil {
		t.Fatal(err)
	}
	return r
}

func (h *harness) types() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if e.Type() != "message.delta" {
			out = append(out, e.Type())
		}
	}
	return out
}

// toolMessages returns the tool messages of the last request the model saw.
func (h *harness) lastToolMessages(t *testing.T) []kernel.Message {
	t.Helper()
	reqs := h.prov.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	var out []kernel.Message
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == kernel.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// checkHistory asserts that every tool call in the stored session has
// exactly one result.
func checkHistory(t *testing.T, s kernel.Store, id string) *kernel.Session {
	t.Helper()
	sess, err := s.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// Each assistant message's calls must be answered exactly once by the
	// tool messages that follow it, before the next assistant message.
	check := func(calls []kernel.ToolCall, results map[string]int) {
		for _, c := range calls {
			if sess.Pending != nil && sess.Pending.Call.ID == c.ID {
				if results[c.ID] != 0 {
					t.Fatalf("pending call %s already has a result", c.ID)
				}
				continue
			}
			if results[c.ID] != 1 {
				t.Fatalf("tool call %s has %d results, want exactly 1", c.ID, results[c.ID])
			}
		}
	}
	var calls []kernel.ToolCall
	results := map[string]int{}
	for i, m := range sess.Messages {
		if m.Seq != uint64(i+1) {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
		if m.Role == kernel.RoleAssistant {
			check(calls, results)
			calls, results = m.ToolCalls, map[string]int{}
		}
		if m.Role == kernel.RoleTool {
			results[m.ToolCallID]++
		}
	}
	check(calls, results)
	return sess
}

func TestRunTextAnswer(t *testing.T) {
	h := newHarness(t, kernel.Config{}, kerneltest.Text("Hello there."))
	res, err := h.k.Run(context.Background(), "", "hi")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.StopCompleted || res.Output != "Hello there." || res.Turns != 1 {
		t.Fatalf("result = %+v", res)
	}
	want := []string{"run.started", "turn.started", "model.request", "message.completed", "run.completed"}
	if got := h.types(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events = %v, want %v", got, want)
	}
	sess := checkHistory(t, h.store, res.SessionID)
	if len(sess.Messages) != 2 || sess.Meta.Status != kernel.StatusIdle || sess.Meta.Title != "hi" || sess.Meta.Runs != 1 {
		t.Fatalf("stored session = %+v", sess.Meta)
	}
	if reqs := h.prov.Requests(); len(reqs[0].Tools) != 0 {
		t.Fatalf("tools offered with an empty registry: %v", reqs[0].Tools)
	}
}

func TestPipelineErrorsReachTheModel(t *testing.T) {
	counter := kernel.NewTool(kernel.ToolSpec{
		Name: "count", Description: "counts", Tier: kernel.TierReadOnly, Source: "test",
		Schema: json.RawMessage(`{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}`),
	}, func(context.Context, json.RawMessage) (kernel.Result, error) {
		return kernel.Result{}, errors.New("disk on fire")
	})
	cases := []struct {
		name string
		call kerneltest.Reply
		want string
		outc kernel.Outcome
	}{
		{"unknown tool", kerneltest.Calls("nope", map[string]any{}), `unknown tool "nope"; the available tools are: count, echo`, kernel.OutcomeError},
		{"malformed JSON", kerneltest.Calls("count", `{"count": 1`), "arguments are not valid JSON", kernel.OutcomeError},
		{"not an object", kerneltest.Calls("count", `[1]`), "arguments must be a JSON object, got array", kernel.OutcomeError},
		{"schema violation", kerneltest.Calls("count", map[string]any{"count": "three"}), "/count: expected integer, got string", kernel.OutcomeError},
		{"missing property", kerneltest.Calls("echo", map[string]any{}), "/: missing properties: 'text'", kernel.OutcomeError},
		{"tool error", kerneltest.Calls("count", map[string]any{"count": 3}), "error: disk on fire", kernel.OutcomeError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, kernel.Config{Tools: registry(t, counter, kerneltest.EchoTool("echo"))}, tc.call, kerneltest.Text("ok"))
			res, err := h.k.Run(context.Background(), "", "go")
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != kernel.StopCompleted {
				t.Fatalf("stop = %s, want completed (a bad call must not abort the run)", res.StopReason)
			}
			msgs := h.lastToolMessages(t)
			if len(msgs) != 1 || !msgs[0].IsError || !strings.Contains(msgs[0].Content, tc.want) {
				t.Fatalf("tool message = %+v, want an error containing %q", msgs, tc.want)
			}
			if len(res.Calls) != 1 || res.Calls[0].Outcome != tc.outc || res.Calls[0].Error == "" {
				t.Fatalf("audit = %+v", res.Calls)
			}
			checkHistory(t, h.store, res.SessionID)
		})
	}
}

func TestToolResultRoundTrip(t *testing.T) {
	h := newHarness(t, kernel.Config{Tools: registry(t, kerneltest.EchoTool("echo"))},
		kerneltest.Calls("echo", map[string]any{"text": "pong"}), kerneltest.Text("done"))
	res, err := h.k.Run(context.Background(), "", "ping")
	if err != nil {
		t.Fatal(err)
	}
	msgs := h.lastToolMessages(t)
	if len(msgs) != 1 || msgs[0].Content != "pong" || msgs[0].ToolCallID != "c1" || msgs[0].ToolName != "echo" {
		t.Fatalf("tool messages = %+v", msgs)
	}
	if len(res.Calls) != 1 || res.Calls[0].Outcome != kernel.OutcomeOK || res.Calls[0].Args != `{"text":"pong"}` {
		t.Fatalf("audit trail = %+v", res.Calls)
	}
	if res.Turns != 2 || res.Output != "done" {
		t.Fatalf("result = %+v", res)
	}
}

func TestMaxTurns(t *testing.T) {
	var replies []kerneltest.Reply
	for range 5 {
		replies = append(replies, kerneltest.Calls("echo", map[string]any{"text": "again"}))
	}
	h := newHarness(t, kernel.Config{MaxTurns: 3, Tools: registry(t, kerneltest.EchoTool("echo"))}, replies...)
	res, err := h.k.Run(context.Background(), "", "loop forever")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.StopMaxTurns || res.Turns != 3 || h.prov.Remaining() != 2 {
		t.Fatalf("stop=%s turns=%d remaining=%d", res.StopReason, res.Turns, h.prov.Remaining())
	}
	checkHistory(t, h.store, res.SessionID)
}

func TestConcurrencyByTier(t *testing.T) {
	ro := kerneltest.NewRecorder("ro", kernel.TierReadOnly, "r")
	ro.Delay = 50 * time.Millisecond
	se := kerneltest.NewRecorder("se", kernel.TierSideEffecting, "s")
	se.Delay = 5 * time.Millisecond
	var order []string
	var mu sync.Mutex
	cfg := kernel.Config{Tools: registry(t, ro, se), OnEvent: func(e kernel.Event) {
		if c, ok := e.(kernel.ToolCompleted); ok {
			mu.Lock()
			order = append(order, c.Tool+":"+c.CallID)
			mu.Unlock()
		}
	}}
	h := newHarness(t, cfg,
		kerneltest.Calls("ro", "{}", "ro", "{}", "ro", "{}", "se", "{}", "se", "{}", "ro", "{}"),
		kerneltest.Text("ok"))
	if _, err := h.k.Run(context.Background(), "", "go"); err != nil {
		t.Fatal(err)
	}
	if ro.MaxConcurrent() != 3 {
		t.Fatalf("read-only calls ran %d at a time, want the 3 contiguous ones together", ro.MaxConcurrent())
	}
	if se.MaxConcurrent() != 1 {
		t.Fatalf("side-effecting calls ran %d at a time, want 1", se.MaxConcurrent())
	}
	tail := strings.Join(order[3:], " ")
	if tail != "se:c4 se:c5 ro:c6" {
		t.Fatalf("completion order after the read-only batch = %s, want document order", tail)
	}
	msgs := h.lastToolMessages(t)
	for i, m := range msgs {
		if m.ToolCallID != fmt.Sprintf("c%d", i+1) {
			t.Fatalf("tool results out of document order: %+v", msgs)
		}
	}
}

func TestCancelDuringToolCall(t *testing.T) {
	block := kerneltest.NewRecorder("slow", kernel.TierReadOnly, "never")
	block.Block = make(chan struct{})
	after := kerneltest.NewRecorder("after", kernel.TierSideEffecting, "never")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := kernel.Config{Tools: registry(t, block, after), OnEvent: func(e kernel.Event) {
		if s, ok := e.(kernel.ToolStarted); ok && s.Tool == "slow" {
			go cancel()
		}
	}}
	h := newHarness(t, cfg, kerneltest.Calls("slow", "{}", "slow", "{}", "after", "{}"), kerneltest.Text("unreachable"))
	res, err := h.k.Run(ctx, "", "go")
	if !errors.Is(err, context.Canceled) || res == nil || res.StopReason != kernel.StopCancelled {
		t.Fatalf("Run = %+v, %v; want cancelled", res, err)
	}
	if len(after.Calls()) != 0 {
		t.Fatal("a call after the cancelled batch still ran")
	}
	sess := checkHistory(t, h.store, res.SessionID)
	last := sess.Messages[len(sess.Messages)-3:]
	for _, m := range last {
		if m.Role != kernel.RoleTool || m.Content != kernel.Cancelled {
			t.Fatalf("tool result after cancel = %+v", m)
		}
	}
	if sess.Meta.Status != kernel.StatusIdle {
		t.Fatalf("status after cancel = %s", sess.Meta.Status)
	}
}

func TestCancelDuringModelCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := kernel.Config{OnEvent: func(e kernel.Event) {
		if _, ok := e.(kernel.ModelRequest); ok {
			go cancel()
		}
	}}
	h := newHarness(t, cfg, kerneltest.Reply{Wait: true})
	res, err := h.k.Run(ctx, "", "go")
	if !errors.Is(err, context.Canceled) || res.StopReason != kernel.StopCancelled {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	sess := checkHistory(t, h.store, res.SessionID)
	// The prompt and the kernel's marker for the turn that got no answer.
	if len(sess.Messages) != 2 || sess.Messages[1].Failed == "" || sess.Meta.Status != kernel.StatusIdle {
		t.Fatalf("after cancel: %d messages %+v, status %s", len(sess.Messages), sess.Messages, sess.Meta.Status)
	}
}

func TestToolTimeout(t *testing.T) {
	slow := kerneltest.NewRecorder("slow", kernel.TierReadOnly, "never")
	slow.Block = make(chan struct{})
	slow.ToolSpec.Timeout = 20 * time.Millisecond
	h := newHarness(t, kernel.Config{Tools: registry(t, slow)}, kerneltest.Calls("slow", "{}"), kerneltest.Text("ok"))
	res, err := h.k.Run(context.Background(), "", "go")
	if err != nil {
		t.Fatal(err)
	}
	msgs := h.lastToolMessages(t)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Content, "tool timed out after 20ms") {
		t.Fatalf("timeout message = %+v", msgs)
	}
	if res.Calls[0].Outcome != kernel.OutcomeError {
		t.Fatalf("outcome = %s", res.Calls[0].Outcome)
	}
}

type providerFunc func(context.Context, kernel.Request, func(kernel.Delta)) (kernel.Response, error)

func (f providerFunc) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	return f(ctx, req, emit)
}

// TestModelTimeout: a generation that outlives model.timeout ends with
// a timeout the provider sees as its context's deadline (not as a
// cancellation), and the error says which limit it was.
func TestModelTimeout(t *testing.T) {
	var seen error
	prov := providerFunc(func(ctx context.Context, _ kernel.Request, _ func(kernel.Delta)) (kernel.Response, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the provider's context has no deadline")
		}
		<-ctx.Done()
		seen = context.Cause(ctx)
		return kernel.Response{}, ctx.Err()
	})
	k, err := kernel.New(kernel.Config{Provider: prov, Store: memory.New(), Model: "m",
		ModelTimeout: 20 * time.Millisecond, Retry: kernel.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "go")
	if err == nil || !strings.Contains(err.Error(), "model call timed out after 20ms") {
		t.Fatalf("Run = %+v, %v; want a model timeout", res, err)
	}
	if !errors.Is(seen, context.DeadlineExceeded) {
		t.Fatalf("the provider saw %v, want DeadlineExceeded", seen)
	}
}

func TestUsageAndCostAcrossRuns(t *testing.T) {
	u := kernel.Usage{InputTokens: 1000, OutputTokens: 100}
	r1, r2 := kerneltest.Calls("echo", map[string]any{"text": "x"}), kerneltest.Text("a")
	r1.Usage, r2.Usage = u, u
	r3 := kerneltest.Text("b")
	r3.Usage = u
	cfg := kernel.Config{Tools: registry(t, kerneltest.EchoTool("echo")),
		Prices: map[string]kernel.Price{"test-model": {InputPerMTok: 2, OutputPerMTok: 10}}}
	h := newHarness(t, cfg, r1, r2, r3)
	res, err := h.k.Run(context.Background(), "", "one")
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.InputTokens != 2000 || res.Usage.OutputTokens != 200 || fmt.Sprintf("%.4f", res.CostUSD) != "0.0060" {
		t.Fatalf("run usage %+v cost %f", res.Usage, res.CostUSD)
	}
	res2, err := h.k.Run(context.Background(), res.SessionID, "two")
	if err != nil {
		t.Fatal(err)
	}
	if res2.Usage.InputTokens != 1000 {
		t.Fatalf("second run usage %+v", res2.Usage)
	}
	sess := checkHistory(t, h.store, res.SessionID)
	if sess.Meta.Usage.InputTokens != 3000 || sess.Meta.Turns != 3 || sess.Meta.Runs != 2 || fmt.Sprintf("%.4f", sess.Meta.CostUSD) != "0.0090" {
		t.Fatalf("session totals %+v", sess.Meta)
	}
	reqs := h.prov.Requests()
	if got := reqs[2].Messages; len(got) != 5 || got[4].Content != "two" {
		t.Fatalf("second run did not continue the conversation: %+v", got)
	}
}

func TestUnknownSessionIsAnError(t *testing.T) {
	h := newHarness(t, kernel.Config{}, kerneltest.Text("x"))
	if _, err := h.k.Run(context.Background(), "missing", "hi"); !errors.Is(err, kernel.ErrSessionNotFound) {
		t.Fatalf("err = %v", err)
	}
}

func TestProviderErrorFailsTheRun(t *testing.T) {
	perr := &kernel.ProviderError{Provider: "fake", StatusCode: 401, Message: "bad key"}
	h := newHarness(t, kernel.Config{}, kerneltest.Reply{Err: perr})
	res, err := h.k.Run(context.Background(), "", "hi")
	var pe *kernel.ProviderError
	if !errors.As(err, &pe) || res.StopReason != kernel.StopError {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	sess := checkHistory(t, h.store, res.SessionID)
	if sess.Meta.Status != kernel.StatusFailed {
		t.Fatalf("status = %s, want failed", sess.Meta.Status)
	}
	if got := h.types(); got[len(got)-1] != "run.failed" {
		t.Fatalf("last event %v", got)
	}
}

func TestRepairInterruptedCalls(t *testing.T) {
	store := memory.New()
	ctx := context.Background()
	t0 := time.Now()
	err := store.Commit(ctx, "crashed", kernel.Step{Messages: []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "go", Time: t0},
		{Seq: 2, Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "a", Name: "echo", Arguments: "{}"}, {ID: "b", Name: "echo", Arguments: "{}"}}, Time: t0},
		{Seq: 3, Role: kernel.RoleTool, ToolCallID: "a", ToolName: "echo", Content: "done", Time: t0},
	}, Meta: kernel.SessionMeta{Status: kernel.StatusRunning, Created: t0}})
	if err != nil {
		t.Fatal(err)
	}
	prov := kerneltest.NewProvider(kerneltest.Text("resumed"))
	k, err := kernel.New(kernel.Config{Provider: prov, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, "crashed", "continue"); err != nil {
		t.Fatal(err)
	}
	sess := checkHistory(t, store, "crashed")
	if m := sess.Messages[3]; m.ToolCallID != "b" || m.Content != kernel.Interrupted || !m.IsError {
		t.Fatalf("repair result = %+v", m)
	}
	req := prov.Requests()[0].Messages
	if len(req) != 5 || req[3].Content != kernel.Interrupted || req[4].Content != "continue" {
		t.Fatalf("the model saw %+v", req)
	}
}

func TestContextWindowFitting(t *testing.T) {
	big := strings.Repeat("x", 400) // ~100 tokens
	var replies []kerneltest.Reply
	for range 4 {
		replies = append(replies, kerneltest.Text(big))
	}
	h := newHarness(t, kernel.Config{ContextWindow: 400, SystemPrompt: "be brief", Context: kernel.ContextConfig{Compact: 1}}, replies...)
	id := ""
	for i := range 4 {
		res, err := h.k.Run(context.Background(), id, fmt.Sprintf("q%d %s", i, big))
		if err != nil {
			t.Fatal(err)
		}
		id = res.SessionID
	}
	last := h.prov.Requests()[3].Messages
	if last[0].Role != kernel.RoleSystem || last[1].Role != kernel.RoleUser || len(last) >= 8 {
		t.Fatalf("fitted request = %d messages starting %s, %s", len(last), last[0].Role, last[1].Role)
	}
	if last[len(last)-1].Content[:2] != "q3" {
		t.Fatalf("the newest prompt was dropped")
	}
	found := false
	for _, ty := range h.types() {
		found = found || ty == "context.compacted"
	}
	if !found {
		t.Fatal("no context.compacted event")
	}
	if sess := checkHistory(t, h.store, id); len(sess.Messages) != 8 {
		t.Fatalf("fitting changed the stored history: %d messages", len(sess.Messages))
	}
}

func TestMarshalEvent(t *testing.T) {
	b, err := kernel.MarshalEvent(kernel.ToolStarted{Turn: 2, CallID: "c1", Tool: "read_file", Args: `{"path":"a"}`, Progress: "[2/8] running tools: read_file"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"tool.started","turn":2,"call_id":"c1","tool":"read_file","args":"{\"path\":\"a\"}","progress":"[2/8] running tools: read_file"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["type"] != "tool.started" {
		t.Fatalf("not valid JSON with a type: %s", b)
	}
}

func TestProgressEvents(t *testing.T) {
	prog := kernel.NewTool(kernel.ToolSpec{Name: "work", Description: "w", Tier: kernel.TierReadOnly, Source: "test"},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			kernel.ReportProgress(ctx, "half way")
			return kernel.Result{Content: "done"}, nil
		})
	h := newHarness(t, kernel.Config{Tools: registry(t, prog, kerneltest.EchoTool("echo"))},
		kerneltest.Calls("work", "{}", "echo", map[string]any{"text": "x"}), kerneltest.Text("ok"))
	if _, err := h.k.Run(context.Background(), "", "go"); err != nil {
		t.Fatal(err)
	}
	var progress []string
	for _, e := range h.events {
		switch e := e.(type) {
		case kernel.ToolProgress:
			progress = append(progress, e.Text)
		case kernel.ToolStarted:
			progress = append(progress, e.Progress)
		case kernel.ModelRequest:
			progress = append(progress, e.Progress)
		}
	}
	want := "[1/8] calling model|[1/8] running tools: work, echo|[1/8] running tools: work, echo|half way|[2/8] calling model"
	if got := strings.Join(progress, "|"); got != want {
		t.Fatalf("progress = %s\nwant       %s", got, want)
	}
}

// A hook may run the rest of the chain more than once (a retry hook): each
// execution gets a live context of its own, with the call's deadline and its
// progress receiver, however the kernel allocates them.
func TestHookRunsChainTwice(t *testing.T) {
	var errs []error
	var deadlines []bool
	prog := kernel.NewTool(kernel.ToolSpec{Name: "work", Description: "w", Tier: kernel.TierReadOnly, Source: "test"},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			_, ok := ctx.Deadline()
			errs, deadlines = append(errs, ctx.Err()), append(deadlines, ok)
			kernel.ReportProgress(ctx, "try "+strconv.Itoa(len(errs)))
			return kernel.Result{Content: "done"}, nil
		})
	retry := func(next kernel.Handler) kernel.Handler {
		return kernel.HandlerFunc(func(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
			if _, err := next.Handle(ctx, c); err != nil {
				return kernel.Result{}, err
			}
			return next.Handle(ctx, c)
		})
	}
	h := newHarness(t, kernel.Config{Tools: registry(t, prog), Hooks: []kernel.Hook{retry}},
		kerneltest.Calls("work", "{}"), kerneltest.Text("ok"))
	if _, err := h.k.Run(context.Background(), "", "go"); err != nil {
		t.Fatal(err)
	}
	if len(errs) != 2 || errs[0] != nil || errs[1] != nil || !deadlines[0] || !deadlines[1] {
		t.Fatalf("executions saw errors %v, deadlines %v; want two live contexts with deadlines", errs, deadlines)
	}
	var progress []string
	for _, e := range h.events {
		if e, ok := e.(kernel.ToolProgress); ok && e.CallID != "" && e.Tool == "work" {
			progress = append(progress, e.Text)
		}
	}
	if got := strings.Join(progress, "|"); got != "try 1|try 2" {
		t.Fatalf("progress = %q, want both executions' reports", got)
	}
}
