package bleveindex_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
)

// TestCommonTermsRankButDoNotSelect: a term held by more than
// CommonShare of the chunks (and at least CommonMin) does not select
// chunks, so a prompt with an everyday word does not score the whole
// scope; it still ranks the chunks the other terms selected; a prompt of
// common terms only is selected by its rarest.
func TestCommonTermsRankButDoNotSelect(t *testing.T) {
	ix, err := bleveindex.Open(filepath.Join(t.TempDir(), "memory"))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var b memory.Batch
	add := func(seq uint64, text string) {
		b.Chunks = append(b.Chunks, memory.Chunk{ID: memory.ChunkID("s", seq, 0), SessionID: "s", Seq: seq, Role: "user", Text: text, Time: t0})
	}
	// 1,500 chunks hold "ordinary", 1,200 of them "giraffe" too.
	n := bleveindex.CommonMin + 500
	for i := range n {
		text := fmt.Sprintf("ordinary filler number%d", i)
		if i < bleveindex.CommonMin+200 {
			text += " giraffe"
		}
		add(uint64(i+100), text)
	}
	add(7, "a zebra crossed")           // rare, selected by zebra
	add(11, "an okapi slept soundly")   // selected by okapi, no giraffe, as long as 12
	add(12, "an okapi fed the giraffe") // selected by okapi, ranked up by giraffe
	if err := ix.Add(ctx, b); err != nil {
		t.Fatal(err)
	}
	scope := memory.Scope{Kind: memory.ScopeSession, SessionID: "s"}
	seqs := func(q string) []uint64 {
		t.Helper()
		hs, err := ix.SearchText(ctx, scope, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, h := range hs {
			out = append(out, h.Chunk.Seq)
		}
		return out
	}
	if got := seqs("an ordinary zebra"); !slices.Equal(got, []uint64{7}) {
		t.Errorf(`"an ordinary zebra" found %v, want [7]: the common "ordinary" selected chunks`, got)
	}
	if got := seqs("okapi giraffe"); !slices.Equal(got, []uint64{12, 11}) {
		t.Errorf(`"okapi giraffe" found %v, want [12 11]: giraffe should rank (12 first) but not select`, got)
	}
	// Only common terms: the rarest (giraffe, 1,201 chunks) selects.
	got := seqs("ordinary giraffe")
	if len(got) != 10 {
		t.Fatalf(`"ordinary giraffe" found %d chunks, want 10`, len(got))
	}
	for _, s := range got {
		if s == 11 || s >= uint64(100+bleveindex.CommonMin+200) {
			t.Errorf(`"ordinary giraffe" found chunk %d, which has no giraffe: the rarest common term should select`, s)
		}
	}
}
