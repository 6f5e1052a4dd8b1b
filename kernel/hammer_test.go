package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// hammerPlan is what one run of the hammer test asks for, encoded in its
// prompt so that the provider and the tools need no shared state: calls is
// how many tool calls the first turn makes (0: the model answers at once);
// cancel is "" (the run completes), "model" (the provider cancels the run
// while it generates) or "tool" (a tool cancels it while it runs).
type hammerPlan struct {
	key    string // unique per run: "g<goroutine>s<session>r<run>"
	calls  int
	cancel string
}

func (p hammerPlan) prompt() string {
	return fmt.Sprintf("key=%s calls=%d cancel=%s", p.key, p.calls, p.cancel)
}

func parseHammerPrompt(s string) (p hammerPlan, ok bool) {
	var calls string
	for f := range strings.FieldsSeq(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "key":
			p.key = v
		case "calls":
			calls = v
		case "cancel":
			p.cancel = v
		}
	}
	n, err := strconv.Atoi(calls)
	return hammerPlan{key: p.key, calls: n, cancel: p.cancel}, err == nil && p.key != ""
}

// hammerProvider plays every run's plan from the request alone. The first
// turn of a run with calls > 0 asks for the calls: read_only "look" calls,
// and for three or more calls one side-effecting "note" in the middle (so a
// round has a concurrent batch, a call alone, and another batch); the next
// turn answers "done <key>".
type hammerProvider struct {
	cancels *sync.Map // key -> context.CancelFunc
}

func (p hammerProvider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	turn, prompt := 0, ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == kernel.RoleUser {
			prompt = m.Content
			break
		}
		if m.Role == kernel.RoleAssistant {
			turn++
		}
	}
	plan, ok := parseHammerPrompt(prompt)
	if !ok {
		return kernel.Response{}, fmt.Errorf("hammer provider: the last user message is %q", prompt)
	}
	if plan.cancel == "model" {
		cancel, _ := p.cancels.Load(plan.key)
		cancel.(context.CancelFunc)()
		<-ctx.Done() // the kernel must stop this generation
		return kernel.Response{}, ctx.Err()
	}
	if turn == 0 && plan.calls > 0 {
		calls := make([]kernel.ToolCall, plan.calls)
		for i := range calls {
			name := "look"
			if plan.calls >= 3 && i == plan.calls/2 {
				name = "note"
			}
			args, _ := json.Marshal(map[string]string{"key": plan.key, "i": strconv.Itoa(i)})
			calls[i] = kernel.ToolCall{ID: plan.key + "_c" + strconv.Itoa(i), Name: name, Arguments: string(args)}
		}
		return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, ToolCalls: calls}, Usage: kernel.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
	text := "done " + plan.key
	emit(kernel.Delta{Text: text})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: text}, Usage: kernel.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

// TestHammerRunManySessions runs many sessions at once through one Kernel
// (the concurrency Kernel's doc promises: concurrent runs of different
// sessions), with concurrent and sequential tool calls, a tool-slot limit,
// and cancellations during model calls and during tool calls. Every
// session's stored history must then be complete and its own: each prompt
// in order, each call answered exactly once with its own result, each
// completed run's answer, a marker for each run cancelled before the model
// answered, and totals that match. Run it with -race.
func TestHammerRunManySessions(t *testing.T) {
	const (
		goroutines = 32
		sessions   = 2 // per goroutine
		runs       = 20
	)
	var cancels sync.Map
	var executed sync.Map // "<key>/<i>" -> *atomic.Int32
	tool := func(name string, tier kernel.Tier) kernel.Tool {
		spec := kernel.ToolSpec{Name: name, Description: name, Tier: tier, Source: "test",
			Schema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"i":{"type":"string"}},"required":["key","i"],"additionalProperties":false}`)}
		return kernel.NewTool(spec, func(ctx context.Context, args json.RawMessage) (kernel.Result, error) {
			var a struct{ Key, I string }
			if err := json.Unmarshal(args, &a); err != nil {
				return kernel.Result{}, err
			}
			n, _ := executed.LoadOrStore(a.Key+"/"+a.I, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			if c, ok := cancels.Load(a.Key + "/tool"); ok && a.I == "0" {
				c.(context.CancelFunc)()
				<-ctx.Done() // the kernel must stop this call
				return kernel.Result{}, ctx.Err()
			}
			return kernel.Result{Content: name + " " + a.Key + "/" + a.I}, nil
		})
	}
	var events atomic.Int64
	store := memory.New()
	k, err := kernel.New(kernel.Config{
		Provider: hammerProvider{cancels: &cancels}, Store: store, Model: "m",
		Tools:              registry(t, tool("look", kernel.TierReadOnly), tool("note", kernel.TierSideEffecting)),
		MaxConcurrentTools: 4,
		OnEvent:            func(kernel.Event) { events.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}

	type sessionLog struct {
		id    string
		plans []hammerPlan
	}
	logs := make([][sessions]sessionLog, goroutines)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*sessions*runs)
	for g := range goroutines {
		wg.Go(func() {
			for r := range runs * sessions {
				s := r % sessions
				log := &logs[g][s]
				plan := hammerPlan{key: fmt.Sprintf("g%ds%dr%d", g, s, r), calls: (g + r) % 5}
				switch (g + 3*r) % 9 {
				case 4:
					plan.cancel = "model"
				case 7:
					if plan.calls > 0 {
						plan.cancel = "tool"
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				switch plan.cancel {
				case "model":
					cancels.Store(plan.key, cancel)
				case "tool":
					cancels.Store(plan.key+"/tool", cancel)
				}
				res, err := k.Run(ctx, log.id, plan.prompt())
				cancel()
				want := kernel.StopCompleted
				if plan.cancel != "" {
					want = kernel.StopCancelled
				}
				switch {
				case res == nil:
					errs <- fmt.Errorf("%s: Run = nil, %v", plan.key, err)
					return
				case res.StopReason != want:
					errs <- fmt.Errorf("%s: stop %s (%v), want %s", plan.key, res.StopReason, err, want)
				case plan.cancel != "" && !errors.Is(err, context.Canceled):
					errs <- fmt.Errorf("%s: cancelled run returned %v", plan.key, err)
				case plan.cancel == "" && (err != nil || res.Output != "done "+plan.key):
					errs <- fmt.Errorf("%s: output %q, err %v", plan.key, res.Output, err)
				}
				if log.id == "" {
					log.id = res.SessionID
				} else if res.SessionID != log.id {
					errs <- fmt.Errorf("%s: ran in session %s, want %s", plan.key, res.SessionID, log.id)
				}
				log.plans = append(log.plans, plan)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	list, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != goroutines*sessions {
		t.Fatalf("the store holds %d sessions, want %d", len(list), goroutines*sessions)
	}
	completedRuns, calls := 0, 0
	for g := range logs {
		for s := range logs[g] {
			log := logs[g][s]
			sess := checkHistory(t, store, log.id)
			c, n := verifyHammerSession(t, sess, log.plans, &executed)
			completedRuns += c
			calls += n
		}
	}
	if completedRuns == 0 || calls == 0 || completedRuns == goroutines*sessions*runs {
		t.Fatalf("the plan did not mix runs: %d completed, %d tool calls", completedRuns, calls)
	}
	t.Logf("%d runs over %d sessions: %d completed, %d tool calls, %d events", goroutines*sessions*runs, goroutines*sessions, completedRuns, calls, events.Load())
	if events.Load() == 0 {
		t.Fatal("no events")
	}
}

// verifyHammerSession walks a stored session against the plans of its runs
// and returns how many runs completed and how many tool calls they made.
func verifyHammerSession(t *testing.T, sess *kernel.Session, plans []hammerPlan, executed *sync.Map) (completed, calls int) {
	t.Helper()
	msgs := sess.Messages
	at := 0
	next := func(what string) kernel.Message {
		t.Helper()
		if at >= len(msgs) {
			t.Fatalf("session %s: history ends before %s", sess.Meta.ID, what)
		}
		at++
		return msgs[at-1]
	}
	turns := 0
	for _, p := range plans {
		if m := next("prompt of " + p.key); m.Role != kernel.RoleUser || m.Content != p.prompt() {
			t.Fatalf("session %s: want the prompt of %s, got %s %q", sess.Meta.ID, p.key, m.Role, m.Content)
		}
		if p.cancel == "model" {
			turns++ // the generation in flight counts (Totals.Turns)
			if m := next("marker of " + p.key); m.Role != kernel.RoleAssistant || m.Failed == "" {
				t.Fatalf("%s: want a Failed marker after the prompt of a run cancelled in the model call, got %+v", p.key, m)
			}
			continue
		}
		turns++
		if p.calls > 0 {
			m := next("the calls of " + p.key)
			if m.Role != kernel.RoleAssistant || len(m.ToolCalls) != p.calls {
				t.Fatalf("%s: want an assistant message with %d calls, got %s with %d", p.key, p.calls, m.Role, len(m.ToolCalls))
			}
			for i, c := range m.ToolCalls {
				res := next("the result of " + c.ID)
				if res.Role != kernel.RoleTool || res.ToolCallID != c.ID {
					t.Fatalf("%s: result %d is %s for %q, want the result of %s", p.key, i, res.Role, res.ToolCallID, c.ID)
				}
				ran := 0
				if n, ok := executed.Load(p.key + "/" + strconv.Itoa(i)); ok {
					ran = int(n.(*atomic.Int32).Load())
				}
				switch {
				case p.cancel == "tool" && i == 0:
					if res.Content != kernel.Cancelled || ran != 1 {
						t.Fatalf("%s: the cancelled call ran %d times and says %q", p.key, ran, res.Content)
					}
				case p.cancel == "tool":
					// The rest of the round: run before the cancellation
					// reached it (its own result) or skipped (Cancelled).
					if want := c.Name + " " + p.key + "/" + strconv.Itoa(i); res.Content != want && res.Content != kernel.Cancelled ||
						res.Content == want && ran != 1 || res.Content == kernel.Cancelled && ran > 1 {
						t.Fatalf("%s: call %d ran %d times and says %q", p.key, i, ran, res.Content)
					}
				default:
					if want := c.Name + " " + p.key + "/" + strconv.Itoa(i); res.Content != want || res.IsError || ran != 1 {
						t.Fatalf("%s: call %d ran %d times and says %q (error %v), want %q once", p.key, i, ran, res.Content, res.IsError, want)
					}
				}
				calls++
			}
			if p.cancel == "tool" {
				continue
			}
			turns++
		}
		if m := next("the answer of " + p.key); m.Role != kernel.RoleAssistant || m.Content != "done "+p.key || m.Failed != "" {
			t.Fatalf("%s: want the answer, got %s %q", p.key, m.Role, m.Content)
		}
		completed++
	}
	if at != len(msgs) {
		t.Fatalf("session %s: %d messages after the last run: %+v", sess.Meta.ID, len(msgs)-at, msgs[at])
	}
	if sess.Meta.Runs != len(plans) || sess.Meta.Turns != turns || sess.Meta.LastSeq != uint64(len(msgs)) ||
		sess.Meta.Status != kernel.StatusIdle || sess.Pending != nil {
		t.Fatalf("session %s: meta %+v, want %d runs, %d turns, last seq %d, idle", sess.Meta.ID, sess.Meta, len(plans), turns, len(msgs))
	}
	return completed, calls
}
