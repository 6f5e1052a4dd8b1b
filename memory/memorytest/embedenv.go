package memorytest

import (
	"os"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/embeddings"
)

// EmbeddingsEnv names the environment variable that points the recall
// benchmarks at an OpenAI-compatible embeddings server (its /v1 root, such
// as http://127.0.0.1:8089/v1 from `make embeddings-server`);
// EmbeddingsModelEnv names the model to ask it for (default "use-lite").
const (
	EmbeddingsEnv      = "AGENTKERNEL_EMBEDDINGS_URL"
	EmbeddingsModelEnv = "AGENTKERNEL_EMBEDDINGS_MODEL"
)

// RecallEmbedder is the embeddings client EmbeddingsEnv names, or nil when
// it is not set (recall of full text only).
func RecallEmbedder(tb testing.TB) memory.Embedder {
	u := os.Getenv(EmbeddingsEnv)
	if u == "" {
		return nil
	}
	hc, err := embeddings.EgressClient(u, nil)
	if err != nil {
		tb.Fatalf("%s: %v", EmbeddingsEnv, err)
	}
	model := os.Getenv(EmbeddingsModelEnv)
	if model == "" {
		model = "use-lite"
	}
	c, err := embeddings.New(embeddings.Config{Model: model, BaseURL: u, HTTPClient: hc, Timeout: time.Minute})
	if err != nil {
		tb.Fatalf("%s: %v", EmbeddingsEnv, err)
	}
	return c
}

// ReportRecall reports r as benchmark metrics: recall@5 and @10 of full
// text, and of vectors alone and hybrid retrieval when measured.
func ReportRecall(b *testing.B, r RecallReport) {
	b.ReportMetric(r.Text.At5, "recall@5")
	b.ReportMetric(r.Text.At10, "recall@10")
	b.ReportMetric(float64(r.Text.Questions), "questions")
	if r.Hybrid.Questions > 0 {
		b.ReportMetric(r.Vector.At5, "vector-recall@5")
		b.ReportMetric(r.Vector.At10, "vector-recall@10")
		b.ReportMetric(r.Hybrid.At5, "hybrid-recall@5")
		b.ReportMetric(r.Hybrid.At10, "hybrid-recall@10")
	}
}
