package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/scripted"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/serve"
)

// The fan-out agents of the rig (rigOpts.fanout): a lead whose model asks
// for four workers at once, then answers.
const (
	leadScript = `
steps:
  - text: "Splitting the review in four."
    tool_calls:
      - name: agent.worker
        args: {task: "check part 1 of notes.txt"}
      - name: agent.worker
        args: {task: "check part 2 of notes.txt"}
      - name: agent.worker
        args: {task: "check part 3 of notes.txt"}
      - name: agent.worker
        args: {task: "check part 4 of notes.txt"}
  - text: "All parts checked."
`
	workerScript = `
steps:
  - text: "This part is fine."
`
	// workerPrice prices the worker's model; the lead's costs nothing,
	// so a lead's spend is its workers'.
	workerModel = "worker-model"
)

var workerPrice = kernel.Price{InputPerMTok: 100_000, OutputPerMTok: 100_000}

// fanoutWorkerCost is what one worker call costs (each of the four tasks
// has the same length, so the same usage); set by rigFanout.
var fanoutWorkerCost float64

// rigFanout builds the agents "worker" (read_file alone, a priced scripted
// model), "lead" (no cap) and "capped" (a cost cap of two and a half
// workers' cost), both calling agent.worker four times at once. It
// measures a worker call's cost by running the worker once on a store of
// its own.
func rigFanout(t testing.TB, base kernel.Config, tools []kernel.Tool) []serve.Agent {
	t.Helper()
	wreg := kernel.NewRegistry()
	for _, tl := range tools {
		if tl.Spec().Name == "read_file" {
			if err := wreg.Register(tl); err != nil {
				t.Fatal(err)
			}
		}
	}
	wsc, err := scripted.Parse("worker.yaml", []byte(workerScript))
	if err != nil {
		t.Fatal(err)
	}
	prices := map[string]kernel.Price{workerModel: workerPrice}
	wc := base
	wc.Provider, wc.Tools, wc.Model, wc.Agent, wc.Prices = scripted.New(wsc), wreg, workerModel, "worker", prices
	probe := wc
	probe.Store, probe.Inbox = memory.New(), nil
	pk, err := kernel.New(probe)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pk.Run(context.Background(), "", "check part 1 of notes.txt")
	if err != nil || res.CostUSD <= 0 {
		t.Fatalf("probe worker run: %v %+v", err, res)
	}
	fanoutWorkerCost = res.CostUSD
	wk, err := kernel.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	at, err := kernel.AgentTool(kernel.Agent{Name: "worker", Description: "Checks one part.", Kernel: wk, Tier: kernel.TierReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	out := []serve.Agent{{Name: "worker", Kind: "agent", Description: "Checks one part.", Model: workerModel, Kernel: wk}}
	for _, name := range []string{"lead", "capped"} {
		lsc, err := scripted.Parse(name+".yaml", []byte(leadScript))
		if err != nil {
			t.Fatal(err)
		}
		reg := kernel.NewRegistry()
		if err := reg.Register(at); err != nil {
			t.Fatal(err)
		}
		lc := base
		lc.Provider, lc.Tools, lc.Model, lc.Agent, lc.Prices = scripted.New(lsc), reg, "lead-model", name, prices
		if name == "capped" {
			lc.Budget = kernel.Budget{CostUSD: 2.5 * fanoutWorkerCost}
		}
		lk, err := kernel.New(lc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, serve.Agent{Name: name, Kind: "agent", Description: "Fans out to four workers.", Model: "lead-model", Kernel: lk})
	}
	return out
}

// TestAgentFanoutLoad: 50 parent runs at once through kernel serve on
// Badger, each fanning out to 4 child agents at once, each parent watched
// by its own event stream: every stream carries exactly the parent's
// stored events, with each child's run nested under its call from
// run.started to run.completed and as many nested events as the child
// session stored; each parent's cost is its four children's, to the
// cent's billionth. Then 50 parents at once whose cap holds two and a
// half workers: none spends more than its cap, none runs all four.
func TestAgentFanoutLoad(t *testing.T) {
	const n = 50
	r := newRig(t, rigOpts{badger: filepath.Join(t.TempDir(), "store"), fanout: true,
		limits: serve.Limits{MaxRuns: 2 * n, MaxRunsPerKey: 2 * n, MaxStreams: 2 * n, MaxStreamsPerKey: 2 * n}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	el := r.store.(kernel.EventLog)

	sids, streams := fanout(t, r, ctx, "lead", n)
	for i, sid := range sids {
		stored, err := el.ReadEvents(ctx, sid, 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		got := streams[i]
		if len(got) != len(stored) {
			t.Fatalf("parent %d: stream %d events, store %d", i, len(got), len(stored))
		}
		nested := map[string]int{} // child session → nested events
		started, completed := map[string]bool{}, map[string]bool{}
		for j := range got {
			if got[j].id != strconv.FormatUint(stored[j].Seq, 10) || got[j].data != string(stored[j].Data) {
				t.Fatalf("parent %d event %d: streamed %s, stored %d", i, j, got[j].id, stored[j].Seq)
			}
			if got[j].typ != "agent.event" {
				continue
			}
			var ae struct {
				CallID    string `json:"call_id"`
				SessionID string `json:"session_id"`
				Event     struct {
					Type string `json:"type"`
				} `json:"event"`
			}
			if err := json.Unmarshal([]byte(got[j].data), &ae); err != nil {
				t.Fatal(err)
			}
			nested[ae.SessionID]++
			switch ae.Event.Type {
			case "run.started":
				started[ae.SessionID] = true
			case "run.completed":
				completed[ae.SessionID] = true
			}
		}
		if last := got[len(got)-1]; last.typ != "run.completed" {
			t.Fatalf("parent %d ended with %s: %s", i, last.typ, last.data)
		}
		if len(nested) != 4 {
			t.Fatalf("parent %d: events of %d children, want 4", i, len(nested))
		}
		var childCost float64
		for csid, k := range nested {
			if !started[csid] || !completed[csid] {
				t.Fatalf("parent %d child %s: run.started %v, run.completed %v", i, csid, started[csid], completed[csid])
			}
			own, err := el.ReadEvents(ctx, csid, 0, 10000)
			if err != nil {
				t.Fatal(err)
			}
			if len(own) != 0 && len(own) != k {
				t.Fatalf("parent %d child %s: %d events nested, %d stored in the child", i, csid, k, len(own))
			}
			child, err := r.store.Load(ctx, csid)
			if err != nil {
				t.Fatal(err)
			}
			if child.Meta.Parent == nil || child.Meta.Parent.SessionID != sid {
				t.Fatalf("child %s is not linked to parent %s: %+v", csid, sid, child.Meta.Parent)
			}
			childCost += child.Meta.CostUSD
		}
		p, err := r.store.Load(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(p.Meta.CostUSD-childCost) > 1e-9 || math.Abs(childCost-4*fanoutWorkerCost) > 1e-9 {
			t.Fatalf("parent %d: cost $%.6f, its children's $%.6f, four workers $%.6f", i, p.Meta.CostUSD, childCost, 4*fanoutWorkerCost)
		}
	}

	// A cap that holds two and a half workers, 50 parents at once.
	limit := 2.5 * fanoutWorkerCost
	capped, _ := fanout(t, r, ctx, "capped", n)
	for i, sid := range capped {
		p, err := r.store.Load(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		ran := 0
		for _, m := range p.Messages {
			if m.Child != nil {
				ran++
			}
		}
		if p.Meta.CostUSD > limit+1e-12 {
			t.Fatalf("capped parent %d spent $%.6f with a cap of $%.6f (%d children ran)", i, p.Meta.CostUSD, limit, ran)
		}
		if ran == 0 || ran == 4 {
			t.Fatalf("capped parent %d: %d children ran, want 1 to 3 (the cap holds two and a half)", i, ran)
		}
	}
	// Nothing is left behind.
	deadline := time.Now().Add(10 * time.Second)
	for st := r.srv.Stats(); st.Runs+st.Streams+st.Topics > 0; st = r.srv.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after the load the server still holds %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fanout starts n runs of agent at once (POST /v1/agents/{agent}/runs),
// each watched by its own stream until the run completes, and returns
// their sessions and streams.
func fanout(t *testing.T, r *rig, ctx context.Context, agent string, n int) ([]string, [][]sseEvent) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sids := make([]string, n)
	streams := make([][]sseEvent, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := func() error {
				p := r.doNoCheck("POST", "/v1/sessions", r.alice, map[string]any{"title": agent + " " + strconv.Itoa(i), "agent": agent})
				if p.status != 201 {
					return fmt.Errorf("create: %d %s", p.status, p.body)
				}
				sid := p.json(t)["id"].(string)
				sids[i] = sid
				got := make(chan error, 1)
				go func() {
					evs, err := r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool {
						return e.typ == "run.completed" || e.typ == "run.failed"
					})
					streams[i] = evs
					got <- err
				}()
				p = r.doNoCheck("POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "review notes.txt"})
				if p.status != 202 {
					return fmt.Errorf("run: %d %s", p.status, p.body)
				}
				return <-got
			}(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return sids, streams
}
