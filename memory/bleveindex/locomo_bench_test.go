package bleveindex_test

import (
	"context"
	"os"
	"testing"

	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

// BenchmarkRecallLoCoMo: recall@5 and @10 of LoCoMo's evidence turns,
// full text only, on the bleve index (the PostgreSQL index runs the same
// measure: kernel/store/postgres). The data is not shipped (CC BY-NC
// 4.0): point AGENTKERNEL_LOCOMO at a copy.
func BenchmarkRecallLoCoMo(b *testing.B) {
	path := os.Getenv(memorytest.LoCoMoEnv)
	if path == "" {
		b.Skipf("%s is not set: point it at a copy of LoCoMo's locomo10.json (CC BY-NC 4.0, not shipped)", memorytest.LoCoMoEnv)
	}
	convs, err := memorytest.LoadLoCoMo(path)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		ix, err := bleveindex.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		r, err := memorytest.Recall(context.Background(), ix, convs)
		ix.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.At5, "recall@5")
		b.ReportMetric(r.At10, "recall@10")
		b.ReportMetric(float64(r.Questions), "questions")
	}
}
