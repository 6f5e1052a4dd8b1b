package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// agentPolicy records what policy sees of each call's agent, asks for the
// tools in ask, and stops a run whose cost passes stopCost.
type agentPolicy struct {
	ask      map[string]bool
	stopCost float64

	mu   sync.Mutex
	seen []kernel.AgentState
	tool []string
}

func (p *agentPolicy) Surface(_ context.Context, _ *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	return tools
}

func (p *agentPolicy) Decide(_ context.Context, st *kernel.State, c *kernel.Call) kernel.Decision {
	p.mu.Lock()
	p.seen = append(p.seen, st.Agent)
	p.tool = append(p.tool, c.Tool().Name)
	p.mu.Unlock()
	if p.ask[c.Tool().Name] {
		return kernel.Decision{ID: "ask-" + c.Tool().Name, Effect: kernel.EffectAsk, Rules: []string{"ask-" + c.Tool().Name}, Message: "check it"}
	}
	return kernel.Decision{ID: "d", Effect: kernel.EffectAllow, Default: true}
}

func (p *agentPolicy) Budget(_ context.Context, st *kernel.State, phase kernel.BudgetPhase) kernel.BudgetVerdict {
	if p.stopCost > 0 && st.RunTotals.CostUSD >= p.stopCost {
		return kernel.BudgetVerdict{Stop: &kernel.BudgetNotice{ID: "cost", Message: "spent enough"}}
	}
	return kernel.BudgetVerdict{}
}

// agentRig is a coder kernel that may call a reviewer agent, on one memory
// store, with the coder's events recorded.
type agentRig struct {
	store           *memory.Store
	coder, revK     *kernel.Kernel
	coderP, reviewP *kerneltest.Provider
	writes          atomic.Int32
	mu              sync.Mutex
	events          []kernel.Event
}

// The prices of the rig's models, per million tokens.
var rigPrices = map[string]kernel.Price{
	"big":   {InputPerMTok: 10, OutputPerMTok: 30},
	"small": {InputPerMTok: 1, OutputPerMTok: 2},
	// pricey makes a short request cost more than a cent.
	"pricey": {InputPerMTok: 500, OutputPerMTok: 1000},
}

type rigOpts struct {
	coderBudget, reviewBudget kernel.Budget
	policy                    kernel.Policy
	// reviewerWrites gives the reviewer the write tool too.
	reviewerWrites bool
	// reviewModel is the reviewer's model (default small).
	reviewModel string
}

func newAgentRig(t *testing.T, o rigOpts, coder []kerneltest.Reply, reviewer []kerneltest.Reply) *agentRig {
	t.Helper()
	g := &agentRig{store: memory.New(), coderP: kerneltest.NewProvider(coder...), reviewP: kerneltest.NewProvider(reviewer...)}
	write := kernel.NewTool(kernel.ToolSpec{Name: "write_file", Description: "writes", Tier: kernel.TierSideEffecting, Source: "test"},
		func(context.Context, json.RawMessage) (kernel.Result, error) {
			g.writes.Add(1)
			return kernel.Result{Content: "written"}, nil
		})
	read := kernel.NewTool(kernel.ToolSpec{Name: "read_file", Description: "reads", Tier: kernel.TierReadOnly, Source: "test"},
		func(context.Context, json.RawMessage) (kernel.Result, error) {
			return kernel.Result{Content: "package main"}, nil
		})
	revTools := []kernel.Tool{read}
	if o.reviewerWrites {
		revTools = append(revTools, write)
	}
	if o.reviewModel == "" {
		o.reviewModel = "small"
	}
	var err error
	g.revK, err = kernel.New(kernel.Config{Provider: g.reviewP, Store: g.store, Tools: registry(t, revTools...), Model: o.reviewModel,
		Prices: rigPrices, Agent: "reviewer", Budget: o.reviewBudget, Policy: o.policy, SystemPrompt: "You review code. You cannot change it."})
	if err != nil {
		t.Fatal(err)
	}
	at, err := kernel.AgentTool(kernel.Agent{Name: "reviewer", Description: "reviews a change", Kernel: g.revK, Tier: kernel.TierReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	g.coder, err = kernel.New(kernel.Config{Provider: g.coderP, Store: g.store, Tools: registry(t, read, write, at), Model: "big",
		Prices: rigPrices, Agent: "coder", Budget: o.coderBudget, Policy: o.policy,
		OnEvent: func(e kernel.Event) { g.mu.Lock(); g.events = append(g.events, e); g.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// nested returns the child events of the coder's stream, innermost, with
// the call they are nested under.
func (g *agentRig) nested() (calls []string, evs []kernel.Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.events {
		if ae, ok := e.(kernel.AgentEvent); ok {
			in, _ := ae.Innermost()
			calls, evs = append(calls, ae.CallID), append(evs, in)
		}
	}
	return calls, evs
}

func usage(in, out int64) kernel.Usage { return kernel.Usage{InputTokens: in, OutputTokens: out} }

func withUsage(r kerneltest.Reply, u kernel.Usage) kerneltest.Reply { r.Usage = u; return r }

func cost(model string, u kernel.Usage) float64 {
	p := rigPrices[model]
	return (float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestAgentDelegation: a coder delegates to a read-only reviewer whose
// model asks for a write tool: the write never runs, the reviewer's
// events arrive nested under the coder's call, the reviewer's spend is
// in the coder's totals, and policy sees each call's agent, depth and
// chain.
func TestAgentDelegation(t *testing.T) {
	pol := &agentPolicy{}
	g := newAgentRig(t, rigOpts{policy: pol},
		[]kerneltest.Reply{
			withUsage(kerneltest.Calls("agent.reviewer", map[string]any{"task": "review main.go", "context": "it was just written"}), usage(1000, 100)),
			withUsage(kerneltest.Text("The reviewer found nothing to fix."), usage(1200, 50)),
		},
		[]kerneltest.Reply{
			withUsage(kerneltest.Calls("read_file", map[string]any{"path": "main.go"}), usage(500, 40)),
			withUsage(kerneltest.Calls("write_file", map[string]any{"path": "main.go", "content": "oops"}), usage(600, 40)),
			withUsage(kerneltest.Text("LGTM. I tried to fix a typo but I may not write."), usage(700, 30)),
		})
	ctx := context.Background()
	res, err := g.coder.Run(ctx, "", "write main.go and have it reviewed")
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.StopCompleted {
		t.Fatalf("stop %s", res.StopReason)
	}
	if n := g.writes.Load(); n != 0 {
		t.Fatalf("the reviewer's write ran %d times", n)
	}
	// The coder's call got the reviewer's answer, and the tool message
	// names the child session.
	parent, err := g.store.Load(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	var answer *kernel.Message
	for i := range parent.Messages {
		if parent.Messages[i].ToolName == "agent.reviewer" {
			answer = &parent.Messages[i]
		}
	}
	if answer == nil || answer.Child == nil || !strings.HasPrefix(answer.Content, "LGTM") || answer.IsError {
		t.Fatalf("agent call's result: %+v", answer)
	}
	childID := kernel.ChildSessionID(res.SessionID, answer.Seq-1, "c1")
	if answer.Child.SessionID != childID || answer.Child.Agent != "reviewer" || answer.Child.StopReason != kernel.StopCompleted {
		t.Fatalf("child record %+v, want session %s", answer.Child, childID)
	}
	child, err := g.store.Load(ctx, childID)
	if err != nil {
		t.Fatal(err)
	}
	link := child.Meta.Parent
	if child.Meta.Agent != "reviewer" || link == nil || link.SessionID != res.SessionID || link.CallID != "c1" || link.Depth != 1 ||
		!slices.Equal(link.Chain, []string{"coder", "reviewer"}) || link.Agent != "coder" {
		t.Fatalf("child meta agent %q parent %+v", child.Meta.Agent, link)
	}
	if child.Messages[0].Content != "review main.go\n\nContext:\nit was just written" {
		t.Fatalf("child prompt %q", child.Messages[0].Content)
	}
	var denied bool
	for _, m := range child.Messages {
		if m.ToolName == "write_file" {
			denied = m.IsError && strings.Contains(m.Content, "unknown tool")
		}
	}
	if !denied {
		t.Fatalf("the reviewer's write_file call was not refused: %+v", child.Messages)
	}
	// The child's own history is its own: the coder's model never saw
	// the reviewer's calls, and the reviewer never saw the coder's prompt.
	for _, req := range g.reviewP.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "have it reviewed") {
				t.Fatal("the reviewer saw the coder's conversation")
			}
		}
	}
	// Nested events: the reviewer's run, under the coder's call c1.
	calls, evs := g.nested()
	var types []string
	for i, e := range evs {
		if calls[i] != "c1" {
			t.Fatalf("child event nested under %q", calls[i])
		}
		types = append(types, e.Type())
		if tc, ok := e.(kernel.ToolCompleted); ok && tc.Tool == "write_file" && tc.Outcome != kernel.OutcomeError {
			t.Fatalf("write_file outcome %s", tc.Outcome)
		}
	}
	if len(types) == 0 || types[0] != "run.started" || types[len(types)-1] != "run.completed" {
		t.Fatalf("nested events %v", types)
	}
	// Charged upward: the coder's run and session count the reviewer's
	// three generations beside its own two.
	want := cost("big", usage(1000, 100)) + cost("big", usage(1200, 50)) +
		cost("small", usage(500, 40)) + cost("small", usage(600, 40)) + cost("small", usage(700, 30))
	if !near(res.CostUSD, want) || !near(parent.Meta.CostUSD, want) {
		t.Fatalf("coder cost: run %.6f, session %.6f, want %.6f", res.CostUSD, parent.Meta.CostUSD, want)
	}
	if got := res.Usage.InputTokens; got != 1000+1200+500+600+700 {
		t.Fatalf("coder input tokens %d", got)
	}
	if !near(answer.Child.CostUSD, cost("small", usage(500, 40))+cost("small", usage(600, 40))+cost("small", usage(700, 30))) {
		t.Fatalf("child cost %.6f", answer.Child.CostUSD)
	}
	// Policy saw who called: the coder's call at depth 0, the reviewer's
	// read at depth 1 with its chain.
	pol.mu.Lock()
	defer pol.mu.Unlock()
	for i, name := range pol.tool {
		a := pol.seen[i]
		switch name {
		case "agent.reviewer":
			if a.Name != "coder" || a.Depth != 0 || a.Parent != "" || !slices.Equal(a.Chain, []string{"coder"}) {
				t.Fatalf("policy saw the coder's call as %+v", a)
			}
		case "read_file":
			if a.Name != "reviewer" || a.Depth != 1 || a.Parent != "coder" || !slices.Equal(a.Chain, []string{"coder", "reviewer"}) {
				t.Fatalf("policy saw the reviewer's call as %+v", a)
			}
		}
	}
	// A child session runs only through its parent.
	if _, err := g.revK.Run(ctx, childID, "more"); !errors.Is(err, kernel.ErrChildSession) {
		t.Fatalf("running the child directly: %v", err)
	}
}

// TestAgentBudgetRefusesChild: a coder with $0.01 left cannot start a
// reviewer whose first model call alone would cost more.
func TestAgentBudgetRefusesChild(t *testing.T) {
	// The coder's cap is $0.05 and its first generation costs $0.04.
	first := usage(3700, 100) // $0.037 + $0.003
	g := newAgentRig(t, rigOpts{coderBudget: kernel.Budget{CostUSD: 0.05}, reviewModel: "pricey"},
		[]kerneltest.Reply{
			withUsage(kerneltest.Calls("agent.reviewer", map[string]any{"task": "review main.go"}), first),
			withUsage(kerneltest.Text("I could not get a review."), usage(10, 10)),
		}, nil)
	// The reviewer's model costs $500/M input: its first request (system
	// prompt, task, one tool: some 60 tokens) is about $0.03, more than
	// the $0.01 left.
	res, err := g.coder.Run(context.Background(), "", "get a review")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.reviewP.Requests()); n != 0 {
		t.Fatalf("the reviewer's model was called %d times", n)
	}
	sess, _ := g.store.Load(context.Background(), res.SessionID)
	var out *kernel.Message
	for i := range sess.Messages {
		if sess.Messages[i].ToolName == "agent.reviewer" {
			out = &sess.Messages[i]
		}
	}
	if out == nil || !out.IsError || !strings.Contains(out.Content, "was not started") || !strings.Contains(out.Content, "$0.0100 of $0.0500 left") {
		t.Fatalf("agent call result: %+v", out)
	}
	if _, err := g.store.Load(context.Background(), kernel.ChildSessionID(res.SessionID, out.Seq-1, "c1")); !errors.Is(err, kernel.ErrSessionNotFound) {
		t.Fatalf("a child session was created: %v", err)
	}
	if !near(res.CostUSD, cost("big", first)+cost("big", usage(10, 10))) {
		t.Fatalf("coder cost %.6f", res.CostUSD)
	}
}

// TestAgentChildCannotOverspend: a reviewer whose model keeps calling
// tools is stopped before the model call that would take the coder past
// its cap, and the coder's total stays within it.
func TestAgentChildCannotOverspend(t *testing.T) {
	step := usage(2000, 500) // $0.003 a generation on the small model
	var reviewer []kerneltest.Reply
	for range 20 {
		reviewer = append(reviewer, withUsage(kerneltest.Calls("read_file", map[string]any{"path": "a"}), step))
	}
	g := newAgentRig(t, rigOpts{coderBudget: kernel.Budget{CostUSD: 0.02}},
		[]kerneltest.Reply{
			withUsage(kerneltest.Calls("agent.reviewer", map[string]any{"task": "review"}), usage(100, 100)),
			withUsage(kerneltest.Text("done"), usage(100, 10)),
		}, reviewer)
	res, err := g.coder.Run(context.Background(), "", "review it")
	if err != nil {
		t.Fatal(err)
	}
	if res.CostUSD > 0.02 {
		t.Fatalf("the coder spent $%.4f with a $0.02 cap", res.CostUSD)
	}
	calls, evs := g.nested()
	_ = calls
	var stopped kernel.StopReason
	for _, e := range evs {
		if rc, ok := e.(kernel.RunCompleted); ok {
			stopped = rc.StopReason
		}
	}
	if stopped != kernel.BudgetStop(kernel.BudgetCostID) {
		t.Fatalf("the reviewer stopped with %q", stopped)
	}
	if n := len(g.reviewP.Requests()); n < 2 || n >= 20 {
		t.Fatalf("the reviewer made %d model calls", n)
	}
}

// TestAgentParentPolicyBudgetStopsChild: a parent's policy budget counts
// its child's spend as it happens: the child stops once it holds.
func TestAgentParentPolicyBudgetStopsChild(t *testing.T) {
	var reviewer []kerneltest.Reply
	for range 20 {
		reviewer = append(reviewer, withUsage(kerneltest.Calls("read_file", map[string]any{"path": "a"}), usage(3000, 1000)))
	}
	pol := &agentPolicy{stopCost: 0.02}
	g := newAgentRig(t, rigOpts{policy: pol},
		[]kerneltest.Reply{
			withUsage(kerneltest.Calls("agent.reviewer", map[string]any{"task": "review"}), usage(100, 100)),
			withUsage(kerneltest.Text("done"), usage(100, 10)),
		}, reviewer)
	res, err := g.coder.Run(context.Background(), "", "review it")
	if err != nil {
		t.Fatal(err)
	}
	// Each reviewer generation costs $0.005: it stops after the one that
	// took the coder to $0.02 or more, and the coder stops on its own
	// budget right after the round.
	if res.StopReason != kernel.BudgetStop("cost") {
		t.Fatalf("coder stopped with %s", res.StopReason)
	}
	if n := len(g.reviewP.Requests()); n != 4 {
		t.Fatalf("the reviewer made %d model calls, want 4", n)
	}
}

// TestAgentMaxDepth: an agent that calls itself stops at the depth limit
// with a typed stop reason its caller reads.
func TestAgentMaxDepth(t *testing.T) {
	store := memory.New()
	var replies []kerneltest.Reply
	for range 10 {
		replies = append(replies, kerneltest.Calls("agent.planner", map[string]any{"task": "plan deeper"}))
	}
	prov := kerneltest.NewProvider(replies...)
	reg := kernel.NewRegistry()
	k, err := kernel.New(kernel.Config{Provider: prov, Store: store, Tools: reg, Model: "m", Agent: "planner", MaxDepth: 2, MaxTurns: 1})
	if err != nil {
		t.Fatal(err)
	}
	at, err := kernel.AgentTool(kernel.Agent{Name: "planner", Kernel: k})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(at); err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), "", "plan")
	if err != nil {
		t.Fatal(err)
	}
	// Depth 0, 1 and 2 call the model; depth 3 stops before.
	if n := len(prov.Requests()); n != 3 {
		t.Fatalf("%d model calls, want 3", n)
	}
	id := res.SessionID
	for depth := 1; depth <= 3; depth++ {
		id = kernel.ChildSessionID(id, 2, "c1")
		s, err := store.Load(context.Background(), id)
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		if s.Meta.Parent.Depth != depth {
			t.Fatalf("depth %d recorded as %d", depth, s.Meta.Parent.Depth)
		}
	}
	d2, _ := store.Load(context.Background(), kernel.ChildSessionID(kernel.ChildSessionID(res.SessionID, 2, "c1"), 2, "c1"))
	last := d2.Messages[len(d2.Messages)-1]
	if last.Child == nil || last.Child.StopReason != kernel.StopMaxDepth || !strings.Contains(last.Content, "max_depth") {
		t.Fatalf("depth 2's call result: %+v", last)
	}
}

// TestAgentApprovalThroughParent: a child's approval is the parent's
// approval; deciding the parent's decides the child's, and both go on.
func TestAgentApprovalThroughParent(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(fmt.Sprint("approve=", approve), func(t *testing.T) {
			g := newAgentRig(t, rigOpts{policy: &agentPolicy{ask: map[string]bool{"write_file": true}}, reviewerWrites: true},
				[]kerneltest.Reply{
					kerneltest.Calls("agent.reviewer", map[string]any{"task": "fix the typo"}),
					kerneltest.Text("the reviewer is done"),
				},
				[]kerneltest.Reply{
					kerneltest.Calls("write_file", map[string]any{"path": "a", "content": "b"}),
					kerneltest.Text("fixed"),
				})
			ctx := context.Background()
			res, err := g.coder.Run(ctx, "", "get it fixed")
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != kernel.StopAwaitingApproval || res.Pending == nil || res.Pending.Child == nil {
				t.Fatalf("stop %s, pending %+v", res.StopReason, res.Pending)
			}
			asks := res.Pending.Asking()
			if asks.Call.Name != "write_file" || asks.Agent != "reviewer" || res.Pending.Call.Name != "agent.reviewer" || res.Pending.Agent != "coder" {
				t.Fatalf("pending %+v asking %+v", res.Pending, asks)
			}
			childID := asks.SessionID
			if _, err := g.revK.Resolve(ctx, childID, true, ""); !errors.Is(err, kernel.ErrChildSession) {
				t.Fatalf("deciding the child directly: %v", err)
			}
			if g.writes.Load() != 0 {
				t.Fatal("the write ran before anyone approved it")
			}
			res, err = g.coder.Resolve(ctx, res.SessionID, approve, "as you wish")
			if err != nil {
				t.Fatal(err)
			}
			child, err := g.store.Load(ctx, childID)
			if err != nil {
				t.Fatal(err)
			}
			if child.Pending != nil || child.Meta.Status != kernel.StatusIdle {
				t.Fatalf("child left with status %s, pending %v", child.Meta.Status, child.Pending)
			}
			if approve {
				if g.writes.Load() != 1 || res.StopReason != kernel.StopCompleted || res.Output != "the reviewer is done" {
					t.Fatalf("writes %d, stop %s, output %q", g.writes.Load(), res.StopReason, res.Output)
				}
				return
			}
			if g.writes.Load() != 0 || !strings.Contains(res.Output, "I did not run agent.reviewer") {
				t.Fatalf("writes %d, output %q", g.writes.Load(), res.Output)
			}
			if last := child.Messages[len(child.Messages)-1]; !strings.Contains(last.Content, "I did not run write_file") {
				t.Fatalf("child's last message %q", last.Content)
			}
		})
	}
}

// dyingStore stops writing once dead is set, as a killed process does.
type dyingStore struct {
	*memory.Store
	dead atomic.Bool
}

func (s *dyingStore) Commit(ctx context.Context, id string, step kernel.Step) error {
	if s.dead.Load() {
		return errors.New("the process is gone")
	}
	return s.Store.Commit(ctx, id, step)
}

// TestAgentCrashResume: the kernel stops while a child runs; the resumed
// parent resumes the child (whose own interrupted call is repaired as
// any), takes its answer as the call's result, and nothing runs twice.
func TestAgentCrashResume(t *testing.T) {
	store := &dyingStore{Store: memory.New()}
	var reads atomic.Int32
	read := kernel.NewTool(kernel.ToolSpec{Name: "read_file", Tier: kernel.TierReadOnly, Source: "test"},
		func(context.Context, json.RawMessage) (kernel.Result, error) {
			if reads.Add(1) == 1 {
				store.dead.Store(true) // killed while the child's first call runs
			}
			return kernel.Result{Content: "package main"}, nil
		})
	build := func(coder, reviewer []kerneltest.Reply) (*kernel.Kernel, *kerneltest.Provider) {
		revP := kerneltest.NewProvider(reviewer...)
		rev, err := kernel.New(kernel.Config{Provider: revP, Store: store, Tools: registry(t, read), Model: "small", Agent: "reviewer"})
		if err != nil {
			t.Fatal(err)
		}
		at, _ := kernel.AgentTool(kernel.Agent{Name: "reviewer", Kernel: rev, Tier: kernel.TierReadOnly})
		k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(coder...), Store: store, Tools: registry(t, at), Model: "big", Agent: "coder"})
		if err != nil {
			t.Fatal(err)
		}
		return k, revP
	}
	k, _ := build([]kerneltest.Reply{kerneltest.Calls("agent.reviewer", map[string]any{"task": "review"})},
		[]kerneltest.Reply{kerneltest.Calls("read_file", map[string]any{"path": "a"})})
	ctx := context.Background()
	res, _ := k.Run(ctx, "", "review it")
	if res == nil {
		t.Fatal("no result")
	}
	parentID := res.SessionID
	childID := kernel.ChildSessionID(parentID, 2, "c1")
	for _, id := range []string{parentID, childID} {
		s, err := store.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Meta.Status != kernel.StatusRunning {
			t.Fatalf("session %s left %s, want running (as a kill leaves it)", id, s.Meta.Status)
		}
	}
	// The restart: a new kernel on the same store.
	store.dead.Store(false)
	k2, revP := build([]kerneltest.Reply{kerneltest.Text("the reviewer approved")},
		[]kerneltest.Reply{kerneltest.Text("looks fine, though my read was interrupted")})
	res, err := k2.Continue(ctx, parentID)
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != kernel.StopCompleted || res.Output != "the reviewer approved" {
		t.Fatalf("stop %s output %q", res.StopReason, res.Output)
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("read_file ran %d times", n)
	}
	child := checkHistory(t, store, childID)
	var repaired, answered bool
	for _, m := range child.Messages {
		if m.ToolName == "read_file" {
			repaired = strings.HasPrefix(m.Content, "interrupted")
		}
		answered = answered || m.Content == "looks fine, though my read was interrupted"
	}
	if !repaired || !answered || child.Meta.Status != kernel.StatusIdle {
		t.Fatalf("child after resume: status %s, messages %+v", child.Meta.Status, child.Messages)
	}
	// The reviewer's model saw its own history, the repaired call included.
	reqs := revP.Requests()
	if len(reqs) != 1 || len(reqs[0].Messages) < 3 {
		t.Fatalf("reviewer requests after the restart: %+v", reqs)
	}
	parent := checkHistory(t, store, parentID)
	var got *kernel.Message
	for i := range parent.Messages {
		if parent.Messages[i].ToolName == "agent.reviewer" {
			got = &parent.Messages[i]
		}
	}
	if got == nil || got.Content != "looks fine, though my read was interrupted" || got.Child == nil || !got.Child.Resumed {
		t.Fatalf("the parent's call answered %+v", got)
	}
	// Continuing again finds nothing to run: the child is not run twice.
	if _, err := k2.Continue(ctx, parentID); !errors.Is(err, kernel.ErrNothingToContinue) {
		t.Fatalf("second continue: %v", err)
	}
}

// TestAgentCallsRunTogether: two agent calls of one round run at the same
// time, even when the agents may write (each child is its own session).
func TestAgentCallsRunTogether(t *testing.T) {
	store := memory.New()
	var arrived sync.WaitGroup
	arrived.Add(2)
	gate := kernel.NewTool(kernel.ToolSpec{Name: "gate", Tier: kernel.TierSideEffecting, Source: "test"},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			arrived.Done()
			done := make(chan struct{})
			go func() { arrived.Wait(); close(done) }()
			select {
			case <-done: // both children are inside their call at once
				return kernel.Result{Content: "met"}, nil
			case <-ctx.Done():
				return kernel.Result{}, ctx.Err()
			}
		})
	mk := func(name string) kernel.Tool {
		p := kerneltest.NewProvider(kerneltest.Calls("gate", map[string]any{}), kerneltest.Text(name+" done"))
		k, err := kernel.New(kernel.Config{Provider: p, Store: store, Tools: registry(t, gate), Model: "m", Agent: name})
		if err != nil {
			t.Fatal(err)
		}
		at, _ := kernel.AgentTool(kernel.Agent{Name: name, Kernel: k, Tier: kernel.TierSideEffecting, Timeout: 20 * time.Second})
		return at
	}
	parent, err := kernel.New(kernel.Config{Store: store, Tools: registry(t, mk("a"), mk("b")), Model: "m",
		Provider: kerneltest.NewProvider(kerneltest.Calls("agent.a", map[string]any{"task": "x"}, "agent.b", map[string]any{"task": "y"}), kerneltest.Text("both done"))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := parent.Run(context.Background(), "", "fan out")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Calls {
		if c.Outcome != kernel.OutcomeOK {
			t.Fatalf("call %s: %s %s", c.Tool, c.Outcome, c.Error)
		}
	}
}

// stealAfterIntent is a leaseStore that gives the lease away right after
// the first intent of session s is stored.
type stealAfterIntent struct {
	*leaseStore
	once sync.Once
}

func (s *stealAfterIntent) Commit(ctx context.Context, id string, step kernel.Step) error {
	if err := s.leaseStore.Commit(ctx, id, step); err != nil {
		return err
	}
	if id == "s" && step.Meta.Round != nil && len(step.Meta.Round.Started) == 1 {
		s.once.Do(s.steal)
	}
	return nil
}

// TestAgentCallsFencedTogether: agent calls that run together have their
// intents stored before any of them starts. The lease is lost after the
// first intent: the second is refused, so neither call runs (no child
// writes), the run ends with ErrLeaseLost, and the session keeps the one
// intent that was stored.
func TestAgentCallsFencedTogether(t *testing.T) {
	st := &stealAfterIntent{leaseStore: &leaseStore{Store: memory.New()}}
	ctx := context.Background()
	if err := st.Store.Commit(ctx, "s", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}); err != nil {
		t.Fatal(err)
	}
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	mk := func(name string) kernel.Tool {
		k, err := kernel.New(kernel.Config{Store: st.Store, Tools: registry(t, write), Model: "m", Agent: name,
			Provider: kerneltest.NewProvider(kerneltest.Calls("write", map[string]any{}), kerneltest.Text(name+" done"))})
		if err != nil {
			t.Fatal(err)
		}
		at, _ := kernel.AgentTool(kernel.Agent{Name: name, Kernel: k, Tier: kernel.TierSideEffecting, Timeout: 20 * time.Second})
		return at
	}
	parent, err := kernel.New(kernel.Config{Store: st, Tools: registry(t, mk("a"), mk("b")), Model: "m",
		Provider: kerneltest.NewProvider(kerneltest.Calls("agent.a", map[string]any{"task": "x"}, "agent.b", map[string]any{"task": "y"}), kerneltest.Text("both done"))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := kernel.HoldLease(ctx, st, "s", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	if _, err := parent.With(kernel.RunOptions{Lease: h}).Run(ctx, "s", "fan out"); !errors.Is(err, kernel.ErrLeaseLost) {
		t.Fatalf("the run ended with %v, want ErrLeaseLost", err)
	}
	if n := len(write.Calls()); n != 0 {
		t.Fatalf("the children wrote %d times after the lease was lost, want 0", n)
	}
	list, _ := st.Store.List(ctx)
	if len(list) != 1 {
		t.Fatalf("the store holds %d sessions, want only the parent (no child started)", len(list))
	}
	se, _ := st.Store.Load(ctx, "s")
	if rd := se.Meta.Round; rd == nil || len(rd.Started) != 1 || rd.Started[0].Tool != "agent.a" {
		t.Fatalf("the parent's round is %+v, want agent.a's intent alone", se.Meta.Round)
	}
}

// gateProvider answers every generation with text and usage, once the
// test opens its gate; entered counts the generations that began.
type gateProvider struct {
	entered atomic.Int32
	gate    chan struct{}
	usage   kernel.Usage
	onEnter func()
}

func (p *gateProvider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	p.entered.Add(1)
	p.onEnter()
	select {
	case <-p.gate:
	case <-ctx.Done():
		return kernel.Response{}, ctx.Err()
	}
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: "checked"}, FinishReason: "stop", Usage: p.usage, Model: req.Model}, nil
}

// TestAgentSiblingsShareBudget: a parent whose budget holds two and a half
// children's first calls fans out to four at once. The children's model
// calls are held until each of the four has either begun one or been
// refused, so every admission happens before any charge: the two
// admitted hold their predictions reserved, the other two are refused,
// and the parent spends no more than its cap. (Without the reservation
// all four are admitted against the same "left" and the parent spends
// four children's worth.)
func TestAgentSiblingsShareBudget(t *testing.T) {
	store := memory.New()
	gp := &gateProvider{gate: make(chan struct{})}
	worker, err := kernel.New(kernel.Config{Provider: gp, Store: store, Tools: registry(t), Model: "pricey", Prices: rigPrices, Agent: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	p, tokens := worker.FirstCall("check it")
	gp.usage = kernel.Usage{InputTokens: tokens} // each child spends exactly its prediction
	at, err := kernel.AgentTool(kernel.Agent{Name: "worker", Kernel: worker, Tier: kernel.TierReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int32
	open := sync.OnceFunc(func() { close(gp.gate) })
	settle := func() {
		if gp.entered.Load()+refused.Load() == 4 {
			open()
		}
	}
	task := map[string]any{"task": "check it"}
	limit := 2.5 * p
	parent, err := kernel.New(kernel.Config{Store: store, Tools: registry(t, at), Model: "free", Prices: rigPrices, Agent: "lead", Budget: kernel.Budget{CostUSD: limit},
		Provider: kerneltest.NewProvider(kerneltest.Calls("agent.worker", task, "agent.worker", task, "agent.worker", task, "agent.worker", task), kerneltest.Text("all checked")),
		OnEvent: func(e kernel.Event) {
			if tc, ok := e.(kernel.ToolCompleted); ok && tc.IsError {
				refused.Add(1)
				settle()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	gp.onEnter = settle
	res, err := parent.Run(context.Background(), "", "fan out")
	if err != nil {
		t.Fatal(err)
	}
	if res.CostUSD > limit+1e-12 {
		t.Fatalf("the parent spent $%.4f with a cap of $%.4f (each child $%.4f; %d children ran their model)", res.CostUSD, limit, p, gp.entered.Load())
	}
	if n := gp.entered.Load(); n != 2 {
		t.Fatalf("%d children ran their model call, want 2", n)
	}
	var notStarted int
	for _, c := range res.Calls {
		if c.Outcome != kernel.OutcomeOK && strings.Contains(c.Error, "not enough budget left") {
			notStarted++
		}
	}
	if notStarted != 2 {
		t.Fatalf("%d children refused for budget, want 2: %+v", notStarted, res.Calls)
	}
}
