package memory_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
)

// TestEmbedBacklogSkipsAPoisonChunk: the embeddings server refuses one
// text (the oldest chunk, first in the backlog) and embeds every other:
// the embedder tries the refused chunk MaxEmbedFailures times, then
// skips it (reported once, listed by EmbedSkipped), and every other chunk
// gets its vector; the refused chunk stays findable by full text. A
// server that refuses everything (down) skips nothing.
func TestEmbedBacklogSkipsAPoisonChunk(t *testing.T) {
	srv := openaitest.NewEmbeddings(t, lexicon)
	srv.SetReject(func(text string) bool { return strings.Contains(text, "poison") })
	ix, err := bleveindex.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	chunk := func(seq uint64, text string) memory.Chunk {
		return memory.Chunk{ID: memory.ChunkID("s", seq, 0), SessionID: "s", Seq: seq, Role: "user", Time: t0.Add(time.Duration(seq) * time.Second), Text: text}
	}
	cs := []memory.Chunk{chunk(1, "the poison text no server embeds")}
	for i := uint64(2); i <= 41; i++ {
		cs = append(cs, chunk(i, fmt.Sprintf("a red car number %d", i)))
	}
	if err := ix.Add(ctx, memory.Batch{Chunks: cs}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reports []string
	ixr := memory.NewIndexer(memory.IndexerConfig{Index: ix, Embedder: embedder(t, srv), Report: func(m string) {
		mu.Lock()
		reports = append(reports, m)
		mu.Unlock()
	}})

	// Down first: every text refused, nothing counted, nothing skipped.
	srv.SetFault(func(int) openaitest.EmbedFault { return openaitest.EmbedFault{Status: 503} })
	for range memory.MaxEmbedFailures + 1 {
		if _, err := ixr.EmbedPending(ctx); err == nil {
			t.Fatal("EmbedPending with the server down: no error")
		}
	}
	if s := ixr.EmbedSkipped(); len(s) != 0 {
		t.Fatalf("the server was down, yet chunks were skipped: %v", s)
	}
	srv.SetFault(nil)

	for round := 0; round < 10; round++ {
		if _, err := ixr.EmbedPending(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	st, err := ix.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Vectors != 40 {
		t.Fatalf("%d of 40 embeddable chunks have a vector: the refused chunk holds up the backlog", st.Vectors)
	}
	if s := ixr.EmbedSkipped(); !slices.Equal(s, []string{"s/1/0"}) {
		t.Fatalf("EmbedSkipped = %v, want [s/1/0]", s)
	}
	mu.Lock()
	n := 0
	for _, r := range reports {
		if strings.Contains(r, "chunk s/1/0 could not be embedded") {
			n++
		}
	}
	mu.Unlock()
	if n != 1 {
		t.Fatalf("the skip was reported %d times, want once: %q", n, reports)
	}
	if hs, err := ix.SearchText(ctx, memory.Scope{Kind: memory.ScopeSession, SessionID: "s"}, "poison", 5); err != nil || len(hs) != 1 {
		t.Fatalf("the skipped chunk is not findable by full text: %v %v", hs, err)
	}
	if n, err := ixr.EmbedPending(ctx); n != 0 || err != nil {
		t.Fatalf("after the backlog: EmbedPending = %d, %v; want 0, nil (the skipped chunk is not retried)", n, err)
	}
}
