package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

// benchMemoryIndex fills a fresh index with n chunks in one owner's scope
// (40 words each, 64 sessions), with 384-dimension vectors when vectors
// is set, then has PostgreSQL analyze the table (as autovacuum does once
// a table grew by a tenth), so the search knows its common lexemes.
func benchMemoryIndex(b *testing.B, n int, vectors bool) *postgres.MemoryIndex {
	b.Helper()
	dsn := pgtest.Shared(b).Migrated(b)
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ix := s.MemoryIndex()
	text := memorytest.NewBenchText(5)
	r := rand.New(rand.NewPCG(3, 4))
	t0 := time.Now()
	batch := make([]memory.Chunk, 0, 1000)
	for i := 0; i < n; i++ {
		sid := fmt.Sprintf("s%d", i%64)
		c := memory.Chunk{ID: memory.ChunkID(sid, uint64(i), 0), SessionID: sid, Owner: "ann", Seq: uint64(i), Role: "user", Time: t0, Text: text.Words(40)}
		if vectors {
			c.Vector = make([]float32, 384)
			for j := range c.Vector {
				c.Vector[j] = r.Float32() - 0.5
			}
		}
		batch = append(batch, c)
		if len(batch) == cap(batch) || i == n-1 {
			if err := ix.Add(context.Background(), memory.Batch{Chunks: batch}); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `ANALYZE ak_memory_chunks`); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d chunks in %v", n, time.Since(t0).Round(time.Second))
	return ix
}

// reportPercentiles reports the p50 and p99 of ds as metrics.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkMemorySearchText: retrieval latency of a prompt of 8 words
// (drawn like the text) against 10k, 100k and 1M chunks in one owner
// scope, and in one session of that owner (1/64 of them). Each corpus is
// filled once and serves both scopes.
func BenchmarkMemorySearchText(b *testing.B) {
	for _, n := range memorytest.BenchSizes(b, 1_000_000) {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			ix := benchMemoryIndex(b, n, false)
			prompts := memorytest.NewBenchText(7)
			for _, scope := range []memory.Scope{{Kind: memory.ScopeOwner, Owner: "ann"}, {Kind: memory.ScopeSession, SessionID: "s7", Owner: "ann"}} {
				b.Run(string(scope.Kind), func(b *testing.B) {
					ds := make([]time.Duration, 0, b.N)
					for i := 0; i < b.N; i++ {
						q := prompts.Words(8)
						start := time.Now()
						if _, err := ix.SearchText(context.Background(), scope, q, 10); err != nil {
							b.Fatal(err)
						}
						ds = append(ds, time.Since(start))
					}
					reportPercentiles(b, ds)
				})
			}
		})
	}
}

// BenchmarkMemorySearchVector: the exact cosine scan (no pgvector) over
// 10k and 100k 384-dimension vectors in one owner scope (1M is left out:
// the scan reads 1.5 GB a query).
func BenchmarkMemorySearchVector(b *testing.B) {
	for _, n := range memorytest.BenchSizes(b, 100_000) {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			ix := benchMemoryIndex(b, n, true)
			r := rand.New(rand.NewPCG(9, 10))
			ds := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				v := make([]float32, 384)
				for j := range v {
					v[j] = r.Float32() - 0.5
				}
				start := time.Now()
				if _, err := ix.SearchVector(context.Background(), memory.Scope{Kind: memory.ScopeOwner, Owner: "ann"}, v, 10); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
			}
			reportPercentiles(b, ds)
		})
	}
}

// BenchmarkMemoryRecallLoCoMo: recall@5 and @10 of LoCoMo's evidence
// turns on PostgreSQL, full text (and vectors alone and hybrid with
// AGENTKERNEL_EMBEDDINGS_URL), the table analyzed after the turns are
// added, as autovacuum would. The data is not shipped (CC BY-NC 4.0):
// point AGENTKERNEL_LOCOMO at a copy.
func BenchmarkMemoryRecallLoCoMo(b *testing.B) {
	path := os.Getenv(memorytest.LoCoMoEnv)
	if path == "" {
		b.Skipf("%s is not set: point it at a copy of LoCoMo's locomo10.json (CC BY-NC 4.0, not shipped)", memorytest.LoCoMoEnv)
	}
	convs, err := memorytest.LoadLoCoMo(path)
	if err != nil {
		b.Fatal(err)
	}
	emb := memorytest.RecallEmbedder(b)
	for i := 0; i < b.N; i++ {
		dsn := pgtest.Shared(b).Migrated(b)
		s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ix := &analyzeFirst{MemoryIndex: s.MemoryIndex(), dsn: dsn}
		r, err := memorytest.RecallWith(context.Background(), ix, convs, emb)
		s.Close()
		if err == nil {
			err = ix.err
		}
		if err != nil {
			b.Fatal(err)
		}
		memorytest.ReportRecall(b, r)
	}
}

// analyzeFirst has PostgreSQL analyze the chunks before the first text
// search, as autovacuum does once a table has grown.
type analyzeFirst struct {
	*postgres.MemoryIndex
	dsn  string
	once sync.Once
	err  error
}

func (a *analyzeFirst) SearchText(ctx context.Context, s memory.Scope, q string, k int) ([]memory.Hit, error) {
	a.once.Do(func() {
		conn, err := pgx.Connect(ctx, a.dsn)
		if err != nil {
			a.err = err
			return
		}
		defer conn.Close(ctx)
		_, a.err = conn.Exec(ctx, `ANALYZE ak_memory_chunks`)
	})
	return a.MemoryIndex.SearchText(ctx, s, q, k)
}
