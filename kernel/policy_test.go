package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// fakePolicy decides by tool name and stops on a turn count.
type fakePolicy struct {
	effects   map[string]kernel.Effect
	offer     map[string]bool // nil offers everything
	stopAt    int             // stop before the model call of this turn
	wrapUp    bool
	warnAt    int
	decisions int
}

func (p *fakePolicy) Surface(_ context.Context, _ *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	if p.offer == nil {
		return tools
	}
	var out []kernel.ToolSpec
	for _, t := range tools {
		if p.offer[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

func (p *fakePolicy) Decide(_ context.Context, _ *kernel.State, c *kernel.Call) kernel.Decision {
	p.decisions++
	e, ok := p.effects[c.Tool().Name]
	if !ok {
		return kernel.Decision{ID: "d", Effect: kernel.EffectAllow, Default: true}
	}
	return kernel.Decision{ID: "d-" + c.Tool().Name, Effect: e, Rules: []string{"rule-" + c.Tool().Name}, Message: string(e) + " " + c.Tool().Name}
}

func (p *fakePolicy) Budget(_ context.Context, st *kernel.State, phase kernel.BudgetPhase) kernel.BudgetVerdict {
	var v kernel.BudgetVerdict
	if p.warnAt > 0 && st.Turn >= p.warnAt {
		v.Warnings = append(v.Warnings, kernel.BudgetNotice{ID: "turns", Message: "getting long"})
	}
	if p.stopAt > 0 && phase == kernel.BeforeModel && st.Turn+1 >= p.stopAt {
		v.Stop = &kernel.BudgetNotice{ID: "turns", Message: "too many turns", WrapUp: p.wrapUp}
	}
	return v
}

func TestPolicyDenyAndSurface(t *testing.T) {
	del := kerneltest.NewRecorder("delete", kernel.TierSideEffecting, "deleted")
	hidden := kerneltest.NewRecorder("hidden", kernel.TierReadOnly, "secret")
	pol := &fakePolicy{effects: map[string]kernel.Effect{"delete": kernel.EffectDeny},
		offer: map[string]bool{"delete": true, "echo": true}}
	h := newHarness(t, kernel.Config{Tools: registry(t, del, hidden, kerneltest.EchoTool("echo")), Policy: pol},
		kerneltest.Calls("delete", "{}", "hidden", "{}", "echo", map[string]any{"text": "hi"}), kerneltest.Text("ok"))
	res, err := h.k.Run(context.Background(), "", "go")
	if err != nil {
		t.Fatal(err)
	}
	if len(del.Calls()) != 0 || len(hidden.Calls()) != 0 {
		t.Fatal("a denied or hidden tool ran")
	}
	offered := h.prov.Requests()[0].Tools
	if len(offered) != 2 || offered[0].Name != "delete" || offered[1].Name != "echo" {
		t.Fatalf("offered = %+v", offered)
	}
	msgs := h.lastToolMessages(t)
	if !strings.Contains(msgs[0].Content, "denied by policy: deny delete") || !strings.Contains(msgs[1].Content, "hidden is not available now") || msgs[2].Content != "hi" {
		t.Fatalf("tool messages = %+v", msgs)
	}
	if res.Calls[0].Outcome != kernel.OutcomeDenied || res.Calls[1].Outcome != kernel.OutcomeDenied || res.Calls[0].Decision == nil || res.Calls[0].Decision.Rules[0] != "rule-delete" {
		t.Fatalf("audit = %+v", res.Calls)
	}
	if pol.decisions != 2 {
		t.Fatalf("policy asked %d times, want 2 (the hidden tool never reaches policy)", pol.decisions)
	}
}

func TestApprovalApprove(t *testing.T) {
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	later := kerneltest.NewRecorder("later", kernel.TierSideEffecting, "later ran")
	pol := &fakePolicy{effects: map[string]kernel.Effect{"write": kernel.EffectAsk}}
	cfg := kernel.Config{Tools: registry(t, write, later), Policy: pol}
	h := newHarness(t, cfg, kerneltest.Calls("write", `{"path":"a"}`, "later", "{}"), kerneltest.Text("all done"))
	res, err := h.k.Run(context.Background(), "", "write it")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.StopAwaitingApproval || res.Pending == nil || res.Pending.RuleID != "rule-write" {
		t.Fatalf("result = %+v", res)
	}
	if len(write.Calls()) != 0 || len(later.Calls()) != 0 {
		t.Fatal("calls ran before approval")
	}
	sess := checkHistory(t, h.store, res.SessionID)
	if sess.Meta.Status != kernel.StatusAwaitingApproval || sess.Pending == nil {
		t.Fatalf("stored: %+v pending %+v", sess.Meta, sess.Pending)
	}
	if _, err := h.k.Run(context.Background(), res.SessionID, "again"); !errors.Is(err, kernel.ErrApprovalPending) {
		t.Fatalf("Run with a pending approval = %v", err)
	}
	// A new kernel over the same store (a restart) resolves it.
	k2, err := kernel.New(kernel.Config{Provider: h.prov, Store: h.store, Tools: registry(t, write, later), Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	res2, err := k2.Resolve(context.Background(), res.SessionID, true, "looks fine")
	if err != nil {
		t.Fatal(err)
	}
	if res2.StopReason != kernel.StopCompleted || res2.Output != "all done" || len(write.Calls()) != 1 || string(write.Calls()[0]) != `{"path":"a"}` {
		t.Fatalf("after approve: %+v, write calls %d", res2, len(write.Calls()))
	}
	if len(later.Calls()) != 0 {
		t.Fatal("the deferred call ran without the model asking again")
	}
	sess = checkHistory(t, h.store, res.SessionID)
	if sess.Pending != nil || sess.Meta.Status != kernel.StatusIdle {
		t.Fatalf("after approve: %+v", sess.Meta)
	}
	msgs := h.lastToolMessages(t)
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0].Content, "not run: an earlier call") || msgs[1].Content != "written" {
		t.Fatalf("the model saw %+v", msgs)
	}
}

func TestApprovalRejectAndExpiry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		approve bool
		advance time.Duration
		want    string
	}{
		{"reject", false, 0, "I did not run write: rejected: not today."},
		{"expired", true, 2 * time.Hour, "I did not run write: approval expired: not today."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
			pol := &fakePolicy{effects: map[string]kernel.Effect{"write": kernel.EffectAsk}}
			h := newHarness(t, kernel.Config{Tools: registry(t, write), Policy: pol, ApprovalTTL: time.Hour,
				Now: func() time.Time { return now }}, kerneltest.Calls("write", "{}"))
			res, err := h.k.Run(context.Background(), "", "write it")
			if err != nil || res.StopReason != kernel.StopAwaitingApproval {
				t.Fatalf("%+v %v", res, err)
			}
			now = now.Add(tc.advance)
			res2, err := h.k.Resolve(context.Background(), res.SessionID, tc.approve, "not today")
			if err != nil {
				t.Fatal(err)
			}
			if res2.Output != tc.want || len(write.Calls()) != 0 || h.prov.Remaining() != 0 || len(h.prov.Requests()) != 1 {
				t.Fatalf("output %q, write calls %d, model requests %d", res2.Output, len(write.Calls()), len(h.prov.Requests()))
			}
			sess := checkHistory(t, h.store, res.SessionID)
			if sess.Pending != nil || sess.Messages[len(sess.Messages)-2].Role != kernel.RoleTool || !sess.Messages[len(sess.Messages)-2].IsError {
				t.Fatalf("history after rejection: %+v", sess.Messages)
			}
			var streamed string
			for _, e := range h.events {
				if d, ok := e.(kernel.MessageDelta); ok {
					streamed = d.Text
				}
			}
			if streamed != tc.want {
				t.Fatalf("the kernel-written answer was not streamed as an event: %q", streamed)
			}
			if _, err := h.k.Resolve(context.Background(), res.SessionID, true, ""); !errors.Is(err, kernel.ErrNoApproval) {
				t.Fatalf("second Resolve = %v", err)
			}
		})
	}
}

func TestBudgetWrapUp(t *testing.T) {
	for _, wrap := range []bool{true, false} {
		pol := &fakePolicy{stopAt: 3, wrapUp: wrap, warnAt: 1}
		echo := kerneltest.Calls("echo", map[string]any{"text": "x"})
		h := newHarness(t, kernel.Config{Tools: registry(t, kerneltest.EchoTool("echo")), Policy: pol},
			echo, echo, kerneltest.Text("wrapped up"))
		res, err := h.k.Run(context.Background(), "", "go")
		if err != nil {
			t.Fatal(err)
		}
		if res.StopReason != kernel.BudgetStop("turns") {
			t.Fatalf("stop = %s", res.StopReason)
		}
		reqs := h.prov.Requests()
		warnings := 0
		for _, e := range h.events {
			if _, ok := e.(kernel.BudgetWarning); ok {
				warnings++
			}
		}
		if warnings != 1 {
			t.Fatalf("%d budget warnings, want 1 per budget per run", warnings)
		}
		if !wrap {
			if len(reqs) != 2 || res.Output != "" {
				t.Fatalf("without wrap-up: %d requests, output %q", len(reqs), res.Output)
			}
			continue
		}
		last := reqs[len(reqs)-1]
		if len(reqs) != 3 || len(last.Tools) != 0 || res.Output != "wrapped up" ||
			!strings.Contains(last.Messages[len(last.Messages)-1].Content, "Budget turns is exhausted") {
			t.Fatalf("wrap-up request: %d requests, tools %v, output %q", len(reqs), last.Tools, res.Output)
		}
		checkHistory(t, h.store, res.SessionID)
	}
}

func TestHookOrderAndRevalidation(t *testing.T) {
	var trace []string
	mk := func(name string) kernel.Hook {
		return func(next kernel.Handler) kernel.Handler {
			return kernel.HandlerFunc(func(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
				trace = append(trace, "before "+name)
				res, err := next.Handle(ctx, c)
				trace = append(trace, "after "+name)
				res.Content += "+" + name
				return res, err
			})
		}
	}
	var rewriteErr error
	rewrite := func(next kernel.Handler) kernel.Handler {
		return kernel.HandlerFunc(func(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
			rewriteErr = c.SetArgs(json.RawMessage(`{"text": 5}`))
			if err := c.SetArgs(json.RawMessage(`{"text":"rewritten"}`)); err != nil {
				return kernel.Result{}, err
			}
			return next.Handle(ctx, c)
		})
	}
	h := newHarness(t, kernel.Config{Tools: registry(t, kerneltest.EchoTool("echo")), Hooks: []kernel.Hook{mk("a"), mk("b"), rewrite}},
		kerneltest.Calls("echo", map[string]any{"text": "original"}), kerneltest.Text("ok"))
	res, err := h.k.Run(context.Background(), "", "go")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(trace, ", "); got != "before a, before b, after b, after a" {
		t.Fatalf("order = %s", got)
	}
	if rewriteErr == nil || !strings.Contains(rewriteErr.Error(), "/text: expected string, got number") {
		t.Fatalf("invalid rewrite accepted: %v", rewriteErr)
	}
	if msgs := h.lastToolMessages(t); msgs[0].Content != "rewritten+b+a" {
		t.Fatalf("model saw %q", msgs[0].Content)
	}
	if res.Calls[0].Args != `{"text":"rewritten"}` {
		t.Fatalf("audit args = %s", res.Calls[0].Args)
	}
}
