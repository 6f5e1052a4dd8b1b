package kernel_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// seenState is what a policy saw of a State, copied (the loop reuses it).
type seenState struct {
	Run, Turn, MaxTurns, SessionTurns, RunTurns int
	Prompt                                      string
	Counts                                      map[string]int
	Calls                                       []kernel.CallOutcome
}

func snapshot(st *kernel.State) seenState {
	return seenState{Run: st.Run, Turn: st.Turn, MaxTurns: st.MaxTurns, SessionTurns: st.SessionTotals.Turns,
		RunTurns: st.RunTotals.Turns, Prompt: st.Prompt, Counts: maps.Clone(st.ToolCounts), Calls: slices.Clone(st.RunCalls)}
}

func (s seenState) String() string {
	type plain seenState // without this String method
	return fmt.Sprintf("%+v", plain(s))
}

// recordingPolicy asks for every call of "write" and records the state
// each generation's surface was chosen with (once per generation, in
// order) and the state each decision saw.
type recordingPolicy struct {
	mu        sync.Mutex
	surfaces  []seenState
	decisions []seenState
}

func (p *recordingPolicy) Surface(_ context.Context, st *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	p.mu.Lock()
	p.surfaces = append(p.surfaces, snapshot(st))
	p.mu.Unlock()
	return tools
}

func (p *recordingPolicy) Decide(_ context.Context, st *kernel.State, c *kernel.Call) kernel.Decision {
	p.mu.Lock()
	p.decisions = append(p.decisions, snapshot(st))
	p.mu.Unlock()
	if c.Tool().Name == "write" && !c.Approved() {
		return kernel.Decision{ID: "d", Effect: kernel.EffectAsk, Message: "write?"}
	}
	return kernel.Decision{ID: "d", Effect: kernel.EffectAllow}
}

func (p *recordingPolicy) Budget(context.Context, *kernel.State, kernel.BudgetPhase) kernel.BudgetVerdict {
	return kernel.BudgetVerdict{}
}

// TestWalkStateIsTheLiveState: the State kernel.WalkState rebuilds from a
// stored session at each generation is the State the live loop gave
// policy there: across an approval that resumes a run (turn numbering and
// the run's calls continue) and across runs.
func TestWalkStateIsTheLiveState(t *testing.T) {
	write := kerneltest.NewRecorder("write", kernel.TierSideEffecting, "written")
	pol := &recordingPolicy{}
	cfg := kernel.Config{Tools: registry(t, write, kerneltest.EchoTool("echo")), Policy: pol}
	echo := map[string]any{"text": "x"}
	h := newHarness(t, cfg,
		kerneltest.Calls("echo", echo),
		kerneltest.Calls("echo", echo, "write", `{}`),
		kerneltest.Calls("echo", echo), // after the approval: turn 3 of run 1
		kerneltest.Text("done"),
		kerneltest.Calls("echo", echo), // run 2
		kerneltest.Text("done again"),
	)
	ctx := context.Background()
	res, err := h.k.Run(ctx, "", "first")
	if err != nil || res.StopReason != kernel.StopAwaitingApproval {
		t.Fatalf("run 1: %+v, %v", res, err)
	}
	res, err = h.k.Resolve(ctx, res.SessionID, true, "")
	if err != nil || res.StopReason != kernel.StopCompleted || res.Turns != 4 {
		t.Fatalf("resolve: %+v, %v (want 4 turns: the run continues)", res, err)
	}
	if res, err = h.k.Run(ctx, res.SessionID, "second"); err != nil || res.Turns != 2 {
		t.Fatalf("run 2: %+v, %v", res, err)
	}
	sess := checkHistory(t, h.store, res.SessionID)

	var rebuilt []seenState
	final, err := kernel.WalkState(sess, 0, func(i int, st *kernel.State) error {
		if sess.Messages[i].Role == kernel.RoleAssistant {
			rebuilt = append(rebuilt, snapshot(st))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rebuilt) != 6 || len(pol.surfaces) != 6 {
		t.Fatalf("%d generations rebuilt, %d seen live; want 6", len(rebuilt), len(pol.surfaces))
	}
	for i := range rebuilt {
		if rebuilt[i].String() != pol.surfaces[i].String() {
			t.Errorf("generation %d:\nrebuilt %v\nlive    %v", i+1, rebuilt[i], pol.surfaces[i])
		}
	}
	// The decision after the approval: run 1, turn 3, the approved write
	// among the run's calls.
	turn3 := pol.decisions[3]
	if turn3.Run != 1 || turn3.Turn != 3 || len(turn3.Calls) != 3 || turn3.Calls[2] != (kernel.CallOutcome{Tool: "write", Outcome: kernel.OutcomeOK}) {
		t.Fatalf("after the approval policy saw %v, want run 1 turn 3 with the approved write among the run's calls", turn3)
	}
	if final.Run != 2 || final.Turn != 2 || final.SessionTotals.Turns != 6 || final.SessionTotals != (kernel.Totals{Turns: sess.Meta.Turns, Usage: sess.Meta.Usage, CostUSD: sess.Meta.CostUSD}) {
		t.Fatalf("final state %+v, meta %+v", final, sess.Meta)
	}
	if sess.Meta.Runs != 2 || sess.Meta.Turns != 6 || final.ToolCounts["echo"] != 4 || final.ToolCounts["write"] != 1 {
		t.Fatalf("meta %+v, counts %v", sess.Meta, final.ToolCounts)
	}
}
