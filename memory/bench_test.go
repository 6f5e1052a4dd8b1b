package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
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

// benchVocabulary is a synthetic vocabulary of n random words; texts draw
// them with a Zipf distribution, as words of a conversation are. The
// PostgreSQL benchmarks (kernel/store/postgres) draw the same way, so the
// stores' numbers compare.
func benchVocabulary(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	words := make([]string, n)
	for i := range words {
		b := make([]byte, 4+r.IntN(6))
		for j := range b {
			b[j] = letters[r.IntN(len(letters))]
		}
		words[i] = string(b)
	}
	return words
}

// benchSizes are the chunk counts of the retrieval benchmarks: 10k, 100k
// and 1M, or the comma-separated counts in AGENTKERNEL_MEMORY_BENCH_SIZES
// (a 1M fill takes minutes); none above max.
func benchSizes(b *testing.B, max int) []int {
	env := os.Getenv("AGENTKERNEL_MEMORY_BENCH_SIZES")
	if env == "" {
		env = "10000,100000,1000000"
	}
	var out []int
	for _, f := range strings.Split(env, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 {
			b.Fatalf("AGENTKERNEL_MEMORY_BENCH_SIZES: %q is not a chunk count", f)
		}
		if n <= max {
			out = append(out, n)
		}
	}
	return out
}

// fill fills a fresh on-disk bleve index with n chunks of one owner (40
// words each, 64 sessions), with dims-dimension vectors when dims > 0.
func fill(b *testing.B, n, dims int) (memory.Index, []string) {
	ix, err := bleveindex.Open(b.TempDir() + "/m")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	words := benchVocabulary(20000)
	zipf := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 1, uint64(len(words)-1))
	r := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	t0 := time.Now()
	const per = 2000
	for start := 0; start < n; start += per {
		var cs []memory.Chunk
		for i := start; i < min(n, start+per); i++ {
			var sb strings.Builder
			for w := 0; w < 40; w++ {
				sb.WriteString(words[zipf.Uint64()])
				sb.WriteByte(' ')
			}
			sid := fmt.Sprintf("s%d", i%64)
			c := memory.Chunk{ID: memory.ChunkID(sid, uint64(i+1), 0), SessionID: sid, Owner: "ann", Seq: uint64(i + 1), Role: "user", Time: t0, Text: sb.String()}
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
	return ix, words
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
	for _, n := range benchSizes(b, 1_000_000) {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			ix, words := fill(b, n, 0)
			for _, s := range []memory.Scope{{Kind: memory.ScopeOwner, Owner: "ann"}, {Kind: memory.ScopeSession, SessionID: "s7", Owner: "ann"}} {
				b.Run(string(s.Kind), func(b *testing.B) {
					zipf := rand.NewZipf(rand.New(rand.NewPCG(7, 8)), 1.1, 1, uint64(len(words)-1))
					ctx := context.Background()
					ds := make([]time.Duration, 0, b.N)
					for b.Loop() {
						q := make([]string, 8)
						for j := range q {
							q[j] = words[zipf.Uint64()]
						}
						t0 := time.Now()
						if _, err := ix.SearchText(ctx, s, strings.Join(q, " "), 10); err != nil {
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
	for _, n := range benchSizes(b, 100_000) {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			ix, _ := fill(b, n, 384)
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
