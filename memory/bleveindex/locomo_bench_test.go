package bleveindex_test

import (
	"context"
	"os"
	"testing"

	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

// BenchmarkRecallLoCoMo: recall@5 and @10 of LoCoMo's evidence turns,
// full text, on the bleve index (the PostgreSQL index runs the same
// measure: kernel/store/postgres). The data is not shipped (CC BY-NC
// 4.0): point AGENTKERNEL_LOCOMO at a copy. With AGENTKERNEL_EMBEDDINGS_URL
// (an OpenAI-compatible /v1 root, such as `make embeddings-server`'s) it
// also reports the recall of the vectors alone and of hybrid retrieval.
func BenchmarkRecallLoCoMo(b *testing.B) {
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
		ix, err := bleveindex.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		r, err := memorytest.RecallWith(context.Background(), ix, convs, emb)
		ix.Close()
		if err != nil {
			b.Fatal(err)
		}
		memorytest.ReportRecall(b, r)
	}
}
