package memory_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
)

// Example indexes two messages of an earlier session, searches them as
// memory's hook does before a model request (full text here: a Retriever
// with an Embedder fuses vector hits in by reciprocal rank), and formats
// the message the hook would inject, with each snippet's provenance.
func Example() {
	ctx := context.Background()
	ix, err := bleveindex.Open("") // in memory; the kernel keeps it beside the Badger store
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	at := time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)
	chunk := func(seq uint64, role, text string) memory.Chunk {
		return memory.Chunk{ID: memory.ChunkID("s1", seq, 0), SessionID: "s1", Owner: "ann", Seq: seq, Role: role, Time: at, Text: text}
	}
	err = ix.Add(ctx, memory.Batch{
		Chunks: []memory.Chunk{
			chunk(1, "user", "The nightly report is uploaded to s3://link-reports at 02:00."),
			chunk(2, "assistant", "Noted: the staging cluster runs three replicas."),
		},
		Marks: map[string]uint64{"s1": 2},
	})
	if err != nil {
		panic(err)
	}
	r := &memory.Retriever{Index: ix}
	hits, err := r.Search(ctx, memory.Scope{Kind: memory.ScopeOwner, Owner: "ann"}, "Where do nightly reports get uploaded?", 4)
	if err != nil {
		panic(err)
	}
	words := func(s string) int { return len(strings.Fields(s)) }
	fmt.Println(len(hits), "hit")
	fmt.Println(memory.Format(hits, 100, words))
	// Output:
	// 1 hit
	// Relevant context from memory (earlier messages, with where they come from):
	// - [session s1 message 1, user, 2026-11-02 09:30 UTC] The nightly report is uploaded to s3://link-reports at 02:00.
}
