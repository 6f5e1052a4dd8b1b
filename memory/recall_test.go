package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	storemem "github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
)

// rig is a kernel whose committed steps are indexed and whose requests
// get memory's injection.
type rig struct {
	store   kernel.Store
	index   memory.Index
	indexer *memory.Indexer
	prov    *kerneltest.Provider
	k       *kernel.Kernel
	stop    func()
}

func newRig(t *testing.T, cfg kernel.Config, replies ...kerneltest.Reply) *rig {
	t.Helper()
	ix, err := bleveindex.Open("")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{store: storemem.New(), index: ix, prov: kerneltest.NewProvider(replies...)}
	r.indexer = memory.NewIndexer(memory.IndexerConfig{Index: ix, Store: r.store})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.indexer.Run(ctx) }()
	r.stop = func() { cancel(); wg.Wait(); ix.Close() }
	t.Cleanup(r.stop)
	h, err := memory.Hook(memory.InjectConfig{Retriever: &memory.Retriever{Index: ix}, MaxTokens: 200})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Provider, cfg.Store, cfg.Model = r.prov, r.store, "test-model"
	cfg.Points = hooks.Points(h)
	cfg.Observe = r.indexer.Observe(nil)
	if r.k, err = kernel.New(cfg); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.indexer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

var fillers = []string{
	"Let's review the quarterly roadmap for the mobile team.",
	"Can you summarise yesterday's incident about the cache warmup?",
	"Draft a polite reply to the vendor about the delayed invoice.",
	"What are good names for a hiking club newsletter?",
	"Explain the difference between a mutex and a semaphore.",
	"List three risks of migrating the billing service this month.",
	"Rewrite this sentence to sound less formal: we shall proceed.",
}

// TestRecallAfterCompaction: a fact stated in the first of 200 turns,
// compacted away since, is retrieved when asked about; the next request
// holds it with its provenance; the stored session builds the same
// request again (replay and resume send the same bytes).
func TestRecallAfterCompaction(t *testing.T) {
	const turns = 200
	var replies []kerneltest.Reply
	for i := 0; i < turns; i++ {
		replies = append(replies, kerneltest.Text(fmt.Sprintf("Noted, item %d.", i)))
	}
	replies = append(replies, kerneltest.Text("Summary: a long planning conversation about roadmaps, invoices and newsletters."))
	replies = append(replies, kerneltest.Text("It is cobalt-harbor-1937."))
	r := newRig(t, kernel.Config{ContextWindow: 1 << 20}, replies...)
	ctx := context.Background()

	res, err := r.k.Run(ctx, "", "Remember this: the vault passphrase for the Orion project is cobalt-harbor-1937.")
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	for i := 1; i < turns; i++ {
		if _, err := r.k.Run(ctx, sid, fillers[i%len(fillers)]+fmt.Sprintf(" (%d)", i)); err != nil {
			t.Fatal(err)
		}
	}
	if rec, err := r.k.Compact(ctx, sid); err != nil || rec == nil {
		t.Fatalf("compaction: %+v, %v", rec, err)
	}
	r.flush(t)

	if _, err := r.k.Run(ctx, sid, "What was the vault passphrase of the Orion project?"); err != nil {
		t.Fatal(err)
	}
	reqs := r.prov.Requests()
	last := reqs[len(reqs)-1].Messages
	var injected string
	for _, m := range last {
		if m.Role == kernel.RoleSystem && strings.HasPrefix(m.Content, memory.Header) {
			injected = m.Content
		} else if strings.Contains(m.Content, "cobalt-harbor-1937") {
			t.Fatalf("the fact is still in the window (message %+v): compaction did not drop it, the test proves nothing", m)
		}
	}
	if injected == "" {
		t.Fatalf("the request after compaction has no memory message: %d messages", len(last))
	}
	want := fmt.Sprintf("- [session %s message 1, user, ", sid)
	if !strings.Contains(injected, want) || !strings.Contains(injected, "cobalt-harbor-1937") {
		t.Fatalf("the memory message lacks the fact or its provenance %q:\n%s", want, injected)
	}

	// Replay: the stored session builds the request that was sent.
	s, err := r.store.Load(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	view, err := kernel.RequestMessages("", s.Messages)
	if err != nil {
		t.Fatal(err)
	}
	if len(view) < len(last) {
		t.Fatalf("the stored session builds %d messages, %d were sent", len(view), len(last))
	}
	for i := range last {
		a, _ := json.Marshal(strip(last[i]))
		b, _ := json.Marshal(strip(view[i]))
		if string(a) != string(b) {
			t.Fatalf("message %d of the replayed request differs:\nsent   %s\nreplay %s", i, a, b)
		}
	}
}

func strip(m kernel.Message) kernel.Message {
	m.Seq, m.Time = 0, time.Time{}
	return m
}
