package memory_test

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
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

var words = []string{"deploy", "cluster", "invoice", "vendor", "roadmap", "mobile", "cache", "incident", "billing", "token",
	"shard", "timeout", "newsletter", "hiking", "mutex", "semaphore", "migration", "schema", "review", "release"}

func fill(b *testing.B, n int) memory.Index {
	ix, err := bleveindex.Open(b.TempDir() + "/m")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	rng := rand.New(rand.NewSource(1))
	ctx := context.Background()
	const per = 2000
	for start := 0; start < n; start += per {
		var cs []memory.Chunk
		for i := start; i < min(n, start+per); i++ {
			txt := ""
			for w := 0; w < 30; w++ {
				txt += words[rng.Intn(len(words))] + fmt.Sprintf("%d ", rng.Intn(500)) + " "
			}
			cs = append(cs, memory.Chunk{ID: memory.ChunkID("s", uint64(i+1), 0), SessionID: "s", Seq: uint64(i + 1), Role: "user", Time: time.Unix(int64(i), 0), Text: txt})
		}
		if err := ix.Add(ctx, memory.Batch{Chunks: cs}); err != nil {
			b.Fatal(err)
		}
	}
	return ix
}

// BenchmarkSearchText is full-text retrieval over one session scope of
// 10k and 100k chunks; it reports p50 and p99 per query.
func BenchmarkSearchText(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ix := fill(b, n)
			s := memory.Scope{Kind: memory.ScopeSession, SessionID: "s"}
			ctx := context.Background()
			var ds []time.Duration
			b.ResetTimer()
			i := 0
			for b.Loop() {
				q := words[i%len(words)] + " " + words[(i*7)%len(words)] + fmt.Sprintf(" %d", i%500)
				t0 := time.Now()
				if _, err := ix.SearchText(ctx, s, q, 8); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
				i++
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
		})
	}
}
