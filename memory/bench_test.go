package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

// BenchmarkOfferStep is the indexing cost on the loop: handing one
// committed step to the indexer (the work itself is on its goroutine).
func BenchmarkOfferStep(b *testing.B) {
	in := memory.NewIndexer(memory.IndexerConfig{Queue: 1})
	msgs := []kernel.Message{{Seq: 1, Role: kernel.RoleUser, Content: "hello"}}
	meta := kernel.SessionMeta{ID: "s"}
	b.ReportAllocs()
	for b.Loop() {
		in.Offer("s", meta, msgs) // the queue is full after the first: the worst case, a map store
	}
}

// fill fills a fresh on-disk bleve index with n chunks of one owner (40
// words each, 64 sessions), with dims-dimension vectors when dims > 0.
func fill(b *testing.B, n, dims int) memory.Index {
	ix, err := bleveindex.Open(b.TempDir() + "/m")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	text := memorytest.NewBenchText(5)
	r := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	t0 := time.Now()
	const per = 2000
	for start := 0; start < n; start += per {
		var cs []memory.Chunk
		for i := start; i < min(n, start+per); i++ {
			sid := fmt.Sprintf("s%d", i%64)
			c := memory.Chunk{ID: memory.ChunkID(sid, uint64(i+1), 0), SessionID: sid, Owner: "ann", Seq: uint64(i + 1), Role: "user", Time: t0, Text: text.Words(40)}
			if dims > 0 {
				c.Vector = make([]float32, dims)
				for j := range c.Vector {
					c.Vector[j] = r.Float32() - 0.5
				}
			}
			cs = append(cs, c)
		}
		if err := ix.Add(ctx, memory.Batch{Chunks: cs}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("filled %d chunks in %v", n, time.Since(t0).Round(time.Second))
	return ix
}

// reportPercentiles reports the p50 and p99 of ds in microseconds.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkSearchText is full-text retrieval of a prompt of 8 words
// (drawn like the text), k=10, over 10k, 100k and 1M chunks in one owner
// scope and in one session of that owner (1/64 of them); it reports p50
// and p99 per query. Each corpus is filled once for both scopes.
func BenchmarkSearchText(b *testing.B) {
	for _, n := range memorytest.BenchSizes(b, 1_000_000) {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			ix := fill(b, n, 0)
			for _, s := range []memory.Scope{{Kind: memory.ScopeOwner, Owner: "ann"}, {Kind: memory.ScopeSession, SessionID: "s7", Owner: "ann"}} {
				b.Run(string(s.Kind), func(b *testing.B) {
					prompts := memorytest.NewBenchText(7)
					ctx := context.Background()
					ds := make([]time.Duration, 0, b.N)
					for b.Loop() {
						q := prompts.Words(8)
						t0 := time.Now()
						if _, err := ix.SearchText(ctx, s, q, 10); err != nil {
							b.Fatal(err)
						}
						ds = append(ds, time.Since(t0))
					}
					reportPercentiles(b, ds)
				})
			}
		})
	}
}

// BenchmarkSearchVector is the exact vector search (cosine over the
// scope's vectors, held in memory) of 384-dimension vectors, k=10, over
// 10k and 100k chunks in one owner scope (1M would hold 1.5 GB of
// vectors).
func BenchmarkSearchVector(b *testing.B) {
	for _, n := range memorytest.BenchSizes(b, 100_000) {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			ix := fill(b, n, 384)
			r := rand.New(rand.NewPCG(9, 10))
			ctx := context.Background()
			ds := make([]time.Duration, 0, b.N)
			for b.Loop() {
				v := make([]float32, 384)
				for j := range v {
					v[j] = r.Float32() - 0.5
				}
				t0 := time.Now()
				if _, err := ix.SearchVector(ctx, memory.Scope{Kind: memory.ScopeOwner, Owner: "ann"}, v, 10); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
			}
			reportPercentiles(b, ds)
		})
	}
}
