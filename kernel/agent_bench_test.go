package kernel_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// callsProvider answers a run's first generation with calls of tool (n of
// them, one per id, args {"task": ...}) and the next with text; after
// sleeping delay(req) when delay is set. It reads the turn from the
// history, so it is safe for concurrent use across sessions.
type callsProvider struct {
	tool  string
	n     int
	text  string
	delay func(req kernel.Request) time.Duration
}

func (p *callsProvider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	if p.delay != nil {
		select {
		case <-time.After(p.delay(req)):
		case <-ctx.Done():
			return kernel.Response{}, ctx.Err()
		}
	}
	last := req.Messages[len(req.Messages)-1]
	if p.n > 0 && last.Role == kernel.RoleUser {
		tc := make([]kernel.ToolCall, p.n)
		for i := range tc {
			tc[i] = kernel.ToolCall{ID: "c" + strconv.Itoa(i), Name: p.tool, Arguments: `{"task":"check part ` + strconv.Itoa(i) + `"}`}
		}
		return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, ToolCalls: tc}, Usage: kernel.Usage{InputTokens: 50, OutputTokens: 10}}, nil
	}
	emit(kernel.Delta{Text: p.text})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: p.text}, Usage: kernel.Usage{InputTokens: 80, OutputTokens: 6}}, nil
}

// taskTool is a plain read-only tool taking an agent tool's arguments.
func taskTool(name string) kernel.Tool {
	return kernel.NewTool(kernel.ToolSpec{Name: name, Description: "checks a part", Tier: kernel.TierReadOnly, Source: "test", Schema: kernel.AgentArgsSchema},
		func(context.Context, json.RawMessage) (kernel.Result, error) {
			return kernel.Result{Content: "This part is fine."}, nil
		})
}

// workerTool is the agent "worker" (its model answers at once, after
// delay when set) as the tool agent.worker, on store.
func workerTool(b *testing.B, store kernel.Store, delay func(kernel.Request) time.Duration) kernel.Tool {
	wk, err := kernel.New(kernel.Config{Provider: &callsProvider{text: "This part is fine.", delay: delay}, Store: store,
		Tools: kernel.NewRegistry(), Model: "m", Agent: "worker"})
	if err != nil {
		b.Fatal(err)
	}
	at, err := kernel.AgentTool(kernel.Agent{Name: "worker", Description: "checks a part", Kernel: wk, Tier: kernel.TierReadOnly})
	if err != nil {
		b.Fatal(err)
	}
	return at
}

// BenchmarkAgentCall measures a run whose one call is a plain tool
// ("tool") against one whose call is an agent ("agent": a child session
// created, its run of one generation, its answer): the difference is the
// overhead of a child agent call over a plain tool call. Models answer at
// once; memory store; each iteration deletes the sessions it made.
func BenchmarkAgentCall(b *testing.B) {
	for _, mode := range []string{"tool", "agent"} {
		b.Run(mode, func(b *testing.B) {
			store := memory.New()
			var t kernel.Tool
			name := "check"
			if mode == "agent" {
				t, name = workerTool(b, store, nil), "agent.worker"
			} else {
				t = taskTool(name)
			}
			reg := kernel.NewRegistry()
			if err := reg.Register(t); err != nil {
				b.Fatal(err)
			}
			k, err := kernel.New(kernel.Config{Provider: &callsProvider{tool: name, n: 1, text: "done"}, Store: store, Tools: reg, Model: "m"})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := k.Run(ctx, "", "check it")
				if err != nil || res.StopReason != kernel.StopCompleted {
					b.Fatal(res, err)
				}
				for _, c := range res.Calls {
					if c.Outcome != kernel.OutcomeOK {
						b.Fatalf("call %s: %s %s", c.Tool, c.Outcome, c.Error)
					}
				}
				deleteTree(b, ctx, store, res.SessionID)
			}
		})
	}
}

// deleteTree deletes a session and its child sessions.
func deleteTree(b *testing.B, ctx context.Context, store *memory.Store, sid string) {
	sess, err := store.Load(ctx, sid)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range sess.Messages {
		if m.Child != nil {
			deleteTree(b, ctx, store, m.Child.SessionID)
		}
	}
	if err := store.Delete(ctx, sid); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAgentIdleChild measures what an idle child session (one whose
// call has returned) costs in memory: 200 parents of one child each run
// on a memory store (which keeps every session's messages and events),
// the parents are deleted, and the heap in use after a GC with the
// children kept is compared with the heap after they are deleted too. The
// kernel itself keeps nothing of a child once its call returns: the
// number is the session's record. Events on, as kernel serve runs.
func BenchmarkAgentIdleChild(b *testing.B) {
	const parents = 200
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	for b.Loop() {
		store := memory.New()
		reg := kernel.NewRegistry()
		if err := reg.Register(workerTool(b, store, nil)); err != nil {
			b.Fatal(err)
		}
		k, err := kernel.New(kernel.Config{Provider: &callsProvider{tool: "agent.worker", n: 1, text: "done"}, Store: store, Tools: reg, Model: "m", OnEvent: func(kernel.Event) {}})
		if err != nil {
			b.Fatal(err)
		}
		var children []string
		for range parents {
			res, err := k.Run(ctx, "", "check it")
			if err != nil {
				b.Fatal(err)
			}
			sess, err := store.Load(ctx, res.SessionID)
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range sess.Messages {
				if m.Child != nil {
					children = append(children, m.Child.SessionID)
				}
			}
			if err := store.Delete(ctx, res.SessionID); err != nil {
				b.Fatal(err)
			}
		}
		if len(children) != parents {
			b.Fatalf("%d children", len(children))
		}
		h1 := heap()
		for _, id := range children {
			if err := store.Delete(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		h2 := heap()
		b.ReportMetric(float64(int64(h1)-int64(h2))/parents, "B/idle-child")
		runtime.KeepAlive(children)
	}
}

// BenchmarkAgentFanout measures a parent fanning out to 10 children at
// once whose models take 10, 15, ... 55 ms: wall/slowest is the run's
// wall time over the slowest child's model time (1 would be no overhead
// and full parallelism; 10 children run one after another would be
// about 6).
func BenchmarkAgentFanout(b *testing.B) {
	const slowest = 55 * time.Millisecond
	store := memory.New()
	delay := func(req kernel.Request) time.Duration {
		// "check part N": child N sleeps 10+5N ms.
		p := req.Messages[len(req.Messages)-1].Content
		n, _ := strconv.Atoi(p[len(p)-1:])
		return time.Duration(10+5*n) * time.Millisecond
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(workerTool(b, store, delay)); err != nil {
		b.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Provider: &callsProvider{tool: "agent.worker", n: 10, text: "all done"}, Store: store, Tools: reg, Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wall time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := k.Run(ctx, "", "check all")
		wall += time.Since(start)
		if err != nil || res.StopReason != kernel.StopCompleted || len(res.Calls) != 10 {
			b.Fatal(res, err)
		}
		deleteTree(b, ctx, store, res.SessionID)
	}
	b.ReportMetric(float64(wall)/float64(b.N)/float64(slowest), "wall/slowest")
}
