package bleveindex_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/memory/embeddings"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

// BenchmarkRecallLoCoMo: recall@5 and @10 of LoCoMo's evidence turns,
// full text only, on the bleve index (the PostgreSQL index runs the same
// measure: kernel/store/postgres). The data is not shipped (CC BY-NC
// 4.0): point AGENTKERNEL_LOCOMO at a copy. With AGENTKERNEL_EMBEDDINGS_URL
// (an OpenAI-compatible /v1 root, such as `make embeddings-server`'s) it
// also reports recall of the vectors alone and of hybrid retrieval.
func BenchmarkRecallLoCoMo(b *testing.B) {
	path := os.Getenv(memorytest.LoCoMoEnv)
	if path == "" {
		b.Skipf("%s is not set: point it at a copy of LoCoMo's locomo10.json (CC BY-NC 4.0, not shipped)", memorytest.LoCoMoEnv)
	}
	convs, err := memorytest.LoadLoCoMo(path)
	if err != nil {
		b.Fatal(err)
	}
	emb := recallEmbedder(b)
	for i := 0; i < b.N; i++ {
		ix, err := bleveindex.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		r, err := memorytest.RecallWith(context.Background(), ix, convs, emb)
		ix.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.Text.At5, "recall@5")
		b.ReportMetric(r.Text.At10, "recall@10")
		b.ReportMetric(float64(r.Text.Questions), "questions")
		if emb != nil {
			b.ReportMetric(r.Vector.At5, "vector-recall@5")
			b.ReportMetric(r.Vector.At10, "vector-recall@10")
			b.ReportMetric(r.Hybrid.At5, "hybrid-recall@5")
			b.ReportMetric(r.Hybrid.At10, "hybrid-recall@10")
		}
	}
}

// recallEmbedder is the embeddings client for AGENTKERNEL_EMBEDDINGS_URL,
// or nil when it is not set (full text only).
func recallEmbedder(b *testing.B) memory.Embedder {
	u := os.Getenv("AGENTKERNEL_EMBEDDINGS_URL")
	if u == "" {
		return nil
	}
	hc, err := embeddings.EgressClient(u, nil)
	if err != nil {
		b.Fatal(err)
	}
	model := os.Getenv("AGENTKERNEL_EMBEDDINGS_MODEL")
	if model == "" {
		model = "use-lite"
	}
	c, err := embeddings.New(embeddings.Config{Model: model, BaseURL: u, HTTPClient: hc, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	return c
}
