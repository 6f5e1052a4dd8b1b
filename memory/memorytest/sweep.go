package memorytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/memory"
)

// DeleteRacingIndexing deletes sessions from st while an indexer writes
// them into ix, and holds that no chunk of a deleted session survives the
// indexer's sweep, however the writes and the deletes interleave: steps
// indexed while their session is deleted, a step indexed after its
// session is gone (a late write), and a vector written back for a chunk of
// a deleted session (the embedder's re-add, which carries no mark). The
// kept sessions stay whole. st must be a kernel.SessionDeleter; ix must
// be a memory.Marker (every index the kernel ships is one).
func DeleteRacingIndexing(t *testing.T, st kernel.Store, ix memory.Index) {
	t.Helper()
	ctx := context.Background()
	del, ok := st.(kernel.SessionDeleter)
	if !ok {
		t.Fatalf("%T cannot delete sessions", st)
	}
	if _, ok := ix.(memory.Marker); !ok {
		t.Fatalf("%T is not a memory.Marker: the indexer cannot sweep it", ix)
	}
	const n = 24
	sid := func(i int) string { return fmt.Sprintf("race-%02d", i) }
	word := func(i int) string { return fmt.Sprintf("zephyr%02dword", i) }
	now := time.Now().UTC()
	meta := func(i int) kernel.SessionMeta {
		return kernel.SessionMeta{ID: sid(i), Status: kernel.StatusIdle, Created: now, Updated: now, Labels: map[string]string{memory.OwnerLabel: "racer"}}
	}
	msg := func(i int, seq uint64) kernel.Message {
		return kernel.Message{Seq: seq, Role: kernel.RoleUser, Time: now, Content: fmt.Sprintf("step %d of session %d mentions %s", seq, i, word(i))}
	}
	ixr := memory.NewIndexer(memory.IndexerConfig{Index: ix, Store: st, Queue: 4})
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); ixr.Run(rctx) }()
	defer func() { cancel(); wg.Wait() }()

	// Writers commit and offer steps; the deleter deletes the odd
	// sessions while they do.
	var writers sync.WaitGroup
	deleted := make(chan int, n)
	for i := range n {
		writers.Add(1)
		go func() {
			defer writers.Done()
			m := meta(i)
			for seq := uint64(1); seq <= 6; seq++ {
				ms := []kernel.Message{msg(i, seq)}
				m.LastSeq = seq
				if err := st.Commit(ctx, sid(i), kernel.Step{Meta: m, Messages: ms}); err != nil {
					return // deleted under us: the store may refuse the step
				}
				ixr.Offer(sid(i), m, ms)
				if i%2 == 1 && seq == 3 {
					if err := del.Delete(ctx, sid(i)); err != nil {
						t.Errorf("delete %s: %v", sid(i), err)
					}
					deleted <- i
					return
				}
			}
		}()
	}
	writers.Wait()
	close(deleted)
	fctx, fcancel := context.WithTimeout(ctx, time.Minute)
	defer fcancel()
	if err := ixr.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	// Late writes, as an indexer or embedder racing the delete would
	// make them: a step with its mark, and a chunk re-added with a vector
	// and no mark.
	var gone []int
	for i := range deleted {
		gone = append(gone, i)
	}
	late := C(sid(gone[0]), "racer", 9, "a late step mentions "+word(gone[0]))
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{late}, Marks: map[string]uint64{sid(gone[0]): 9}}); err != nil {
		t.Fatal(err)
	}
	revec := C(sid(gone[1]), "racer", 1, "step 1 of session mentions "+word(gone[1]))
	revec.Vector = []float32{1, 0, 0}
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{revec}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ixr.Sweep(ctx); err != nil {
		t.Fatal(err)
	}

	marks, err := ix.(memory.Marker).Marks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scope := memory.Scope{Kind: memory.ScopeOwner, Owner: "racer"}
	for _, i := range gone {
		if hs, err := ix.SearchText(ctx, scope, word(i), 10); err != nil || len(hs) != 0 {
			t.Errorf("deleted session %s: %d chunks survive (%v)", sid(i), len(hs), err)
		}
		if _, ok := marks[sid(i)]; ok {
			t.Errorf("deleted session %s keeps a mark or chunks in the index's sessions", sid(i))
		}
	}
	for i := 0; i < n; i += 2 {
		if hs, err := ix.SearchText(ctx, scope, word(i), 10); err != nil || len(hs) != 6 {
			t.Errorf("kept session %s: %d chunks, want 6 (%v)", sid(i), len(hs), err)
		}
	}
}
