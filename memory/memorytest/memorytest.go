// Package memorytest is the conformance suite every memory.Index passes:
// the bleve index beside the Badger store, the PostgreSQL index and a
// subprocess plugin run the same tests.
package memorytest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/memory"
)

// Opener opens one backing of an index (a directory, a database schema).
// It may be called again after Close and then opens the same data.
type Opener func() (memory.Index, error)

// RunIndexTests runs the conformance suite. fresh returns an Opener for a
// new, empty backing each time it is called; the suite closes what it
// opens.
func RunIndexTests(t *testing.T, fresh func(t *testing.T) Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"AddSearchText", testAddSearchText},
		{"Stemming", testStemming},
		{"IdempotentAdd", testIdempotentAdd},
		{"ScopeIsolation", testScopeIsolation},
		{"InvalidScope", testInvalidScope},
		{"DeleteSession", testDeleteSession},
		{"Scripts", testScripts},
		{"EmptyQuery", testEmptyQuery},
		{"LargeText", testLargeText},
		{"Vectors", testVectors},
		{"VectorScope", testVectorScope},
		{"BadVectors", testBadVectors},
		{"Marks", testMarks},
		{"Pending", testPending},
		{"Reopen", testReopen},
		{"Status", testStatus},
		{"Concurrent", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, fresh(t)) })
	}
}

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// C builds a valid chunk of session sid, message seq, part 0, owner owner.
func C(sid, owner string, seq uint64, text string) memory.Chunk {
	return memory.Chunk{
		ID: memory.ChunkID(sid, seq, 0), SessionID: sid, Owner: owner, Workspace: "/ws/" + owner,
		Seq: seq, Role: "user", Time: t0.Add(time.Duration(seq) * time.Second), Text: text,
	}
}

func open(t *testing.T, o Opener) memory.Index {
	t.Helper()
	ix, err := o()
	if err != nil {
		t.Fatalf("open index: %v", err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func add(t *testing.T, ix memory.Index, cs ...memory.Chunk) {
	t.Helper()
	if err := ix.Add(context.Background(), memory.Batch{Chunks: cs}); err != nil {
		t.Fatalf("Add: %v", err)
	}
}

func sess(id, owner string) memory.Scope {
	return memory.Scope{Kind: memory.ScopeSession, SessionID: id, Owner: owner}
}

func text(t *testing.T, ix memory.Index, s memory.Scope, q string, k int) []memory.Hit {
	t.Helper()
	hs, err := ix.SearchText(context.Background(), s, q, k)
	if err != nil {
		t.Fatalf("SearchText(%+v, %q): %v", s, q, err)
	}
	checkHits(t, s, hs, k)
	return hs
}

// checkHits holds what every result list must: in scope, ranked 1..n best
// first, at most k, no vectors.
func checkHits(t *testing.T, s memory.Scope, hs []memory.Hit, k int) {
	t.Helper()
	if len(hs) > k {
		t.Fatalf("%d hits for k=%d", len(hs), k)
	}
	for i, h := range hs {
		if !s.Match(&h.Chunk) {
			t.Fatalf("hit %s (session %s, owner %q, workspace %q) is outside scope %+v", h.Chunk.ID, h.Chunk.SessionID, h.Chunk.Owner, h.Chunk.Workspace, s)
		}
		if h.Rank != i+1 {
			t.Fatalf("hit %d has rank %d", i, h.Rank)
		}
		if i > 0 && h.Score > hs[i-1].Score {
			t.Fatalf("hit %d scores %v above hit %d's %v: not best first", i, h.Score, i-1, hs[i-1].Score)
		}
		if h.Chunk.Vector != nil {
			t.Fatalf("hit %s carries its vector", h.Chunk.ID)
		}
		if h.Chunk.Text == "" {
			t.Fatalf("hit %s has no text", h.Chunk.ID)
		}
	}
}

func ids(hs []memory.Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Chunk.ID
	}
	return out
}

func has(hs []memory.Hit, id string) bool {
	for _, h := range hs {
		if h.Chunk.ID == id {
			return true
		}
	}
	return false
}

func testAddSearchText(t *testing.T, o Opener) {
	ix := open(t, o)
	add(t, ix,
		C("s1", "", 1, "The deploy key for the staging cluster lives in vault path kv/staging/deploy."),
		C("s1", "", 2, "Lunch today is pizza with the team."),
		C("s1", "", 3, "We rotated the staging deploy key on Tuesday; the cluster restarted cleanly."),
	)
	hs := text(t, ix, sess("s1", ""), "staging deploy key", 10)
	if len(hs) < 2 || !has(hs, "s1/1/0") || !has(hs, "s1/3/0") || has(hs, "s1/2/0") {
		t.Fatalf("query 'staging deploy key' found %v, want s1/1/0 and s1/3/0 and not s1/2/0", ids(hs))
	}
	if hs[0].Source != memory.SourceText {
		t.Fatalf("source %q, want text", hs[0].Source)
	}
	got := hs[0].Chunk
	want := C("s1", "", got.Seq, "")
	if got.SessionID != "s1" || got.Role != "user" || got.Workspace != want.Workspace || !got.Time.Equal(want.Time) {
		t.Fatalf("hit lost its provenance: %+v", got)
	}
	if hs := text(t, ix, sess("s1", ""), "pizza", 1); len(hs) != 1 || hs[0].Chunk.ID != "s1/2/0" {
		t.Fatalf("query 'pizza' k=1 found %v, want [s1/2/0]", ids(hs))
	}
	// An identifier is found by its exact spelling.
	add(t, ix, C("s1", "", 4, "The failing request id was req_7f3a9c2e and it hit shard 12."))
	if hs := text(t, ix, sess("s1", ""), "req_7f3a9c2e", 5); len(hs) == 0 || hs[0].Chunk.ID != "s1/4/0" {
		t.Fatalf("identifier query found %v, want s1/4/0 first", ids(hs))
	}
}

func testStemming(t *testing.T, o Opener) {
	ix := open(t, o)
	add(t, ix,
		C("s1", "", 1, "The migrations were running for hours."),
		C("s1", "", 2, "Nothing about databases here."),
	)
	for _, q := range []string{"migration", "run", "runs"} {
		if hs := text(t, ix, sess("s1", ""), q, 5); len(hs) != 1 || hs[0].Chunk.ID != "s1/1/0" {
			t.Errorf("query %q found %v, want [s1/1/0] (English stemming)", q, ids(hs))
		}
	}
}

func testIdempotentAdd(t *testing.T, o Opener) {
	ix := open(t, o)
	c := C("s1", "", 1, "orchid gardens in the valley")
	add(t, ix, c)
	add(t, ix, c)
	add(t, ix, c, c)
	if hs := text(t, ix, sess("s1", ""), "orchid", 10); len(hs) != 1 {
		t.Fatalf("a chunk added three times is found %d times: %v", len(hs), ids(hs))
	}
	st, err := ix.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Chunks != 1 {
		t.Fatalf("Status.Chunks = %d after adding one chunk three times", st.Chunks)
	}
	// Adding again replaces: the old text is gone.
	c.Text = "tulip fields by the river"
	add(t, ix, c)
	if hs := text(t, ix, sess("s1", ""), "orchid", 10); len(hs) != 0 {
		t.Fatalf("replaced text still found: %v", ids(hs))
	}
	if hs := text(t, ix, sess("s1", ""), "tulip", 10); len(hs) != 1 {
		t.Fatalf("new text not found: %v", ids(hs))
	}
}

func testScopeIsolation(t *testing.T, o Opener) {
	ix := open(t, o)
	const secret = "the launch code is mauve-pelican-42"
	a1, a2, b1 := C("a1", "alice", 1, secret), C("a2", "alice", 1, secret), C("b1", "bob", 1, secret)
	local := C("l1", "", 1, secret)
	a2.Workspace = "/ws/other"
	add(t, ix, a1, a2, b1, local)
	q := "launch code mauve pelican"
	cases := []struct {
		name  string
		scope memory.Scope
		want  []string
	}{
		{"session of alice", sess("a1", "alice"), []string{"a1/1/0"}},
		{"session of bob asked as alice", sess("b1", "alice"), nil},
		{"session of alice asked as bob", sess("a1", "bob"), nil},
		{"session of alice asked with no owner", sess("a1", ""), nil},
		{"owner alice", memory.Scope{Kind: memory.ScopeOwner, Owner: "alice"}, []string{"a1/1/0", "a2/1/0"}},
		{"owner bob", memory.Scope{Kind: memory.ScopeOwner, Owner: "bob"}, []string{"b1/1/0"}},
		{"owner empty (local)", memory.Scope{Kind: memory.ScopeOwner, Owner: ""}, []string{"l1/1/0"}},
		{"owner nobody", memory.Scope{Kind: memory.ScopeOwner, Owner: "mallory"}, nil},
		{"workspace of alice", memory.Scope{Kind: memory.ScopeWorkspace, Owner: "alice", Workspace: "/ws/alice"}, []string{"a1/1/0"}},
		{"workspace of bob asked as alice", memory.Scope{Kind: memory.ScopeWorkspace, Owner: "alice", Workspace: "/ws/bob"}, nil},
		{"owner with a wildcard", memory.Scope{Kind: memory.ScopeOwner, Owner: "*"}, nil},
		{"owner with a quote", memory.Scope{Kind: memory.ScopeOwner, Owner: `alice" OR owner:"bob`}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hs := text(t, ix, tc.scope, q, 10)
			if fmt.Sprint(sorted(ids(hs))) != fmt.Sprint(sorted(tc.want)) {
				t.Fatalf("scope %+v found %v, want %v", tc.scope, ids(hs), tc.want)
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func testInvalidScope(t *testing.T, o Opener) {
	ix := open(t, o)
	add(t, ix, C("s1", "", 1, "anything at all"))
	for _, s := range []memory.Scope{
		{Kind: "everything"},
		{Kind: ""},
		{Kind: memory.ScopeSession},
		{Kind: memory.ScopeWorkspace, Owner: "alice"},
	} {
		if _, err := ix.SearchText(context.Background(), s, "anything", 5); !errors.Is(err, memory.ErrScope) {
			t.Errorf("SearchText scope %+v: err %v, want ErrScope", s, err)
		}
		if _, err := ix.SearchVector(context.Background(), s, []float32{1, 0}, 5); !errors.Is(err, memory.ErrScope) {
			t.Errorf("SearchVector scope %+v: err %v, want ErrScope", s, err)
		}
	}
}

func testDeleteSession(t *testing.T, o Opener) {
	ix := open(t, o)
	ctx := context.Background()
	v := []float32{1, 0, 0}
	c1, c2 := C("gone", "", 1, "zebra crossing near the office"), C("kept", "", 1, "zebra crossing near the office")
	c1.Vector, c2.Vector = v, v
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{c1, c2, C("gone", "", 2, "more zebra facts")}, Marks: map[string]uint64{"gone": 2, "kept": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.DeleteSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if hs := text(t, ix, sess("gone", ""), "zebra", 10); len(hs) != 0 {
		t.Fatalf("deleted session still found by text: %v", ids(hs))
	}
	own := memory.Scope{Kind: memory.ScopeOwner}
	if hs := text(t, ix, own, "zebra", 10); len(hs) != 1 || hs[0].Chunk.SessionID != "kept" {
		t.Fatalf("owner scope after delete found %v, want only kept/1/0", ids(hs))
	}
	hs, err := ix.SearchVector(ctx, own, v, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Chunk.SessionID != "kept" {
		t.Fatalf("vector search after delete found %v, want only kept/1/0", ids(hs))
	}
	if m, err := ix.Mark(ctx, "gone"); err != nil || m != 0 {
		t.Fatalf("Mark of a deleted session = %d, %v; want 0", m, err)
	}
	if m, err := ix.Mark(ctx, "kept"); err != nil || m != 1 {
		t.Fatalf("Mark of the kept session = %d, %v; want 1", m, err)
	}
	if err := ix.DeleteSession(ctx, "never-was"); err != nil {
		t.Fatalf("deleting an unknown session: %v", err)
	}
	st, err := ix.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Chunks != 1 {
		t.Fatalf("Status.Chunks = %d after delete, want 1", st.Chunks)
	}
}

func testScripts(t *testing.T, o Opener) {
	ix := open(t, o)
	add(t, ix,
		C("s1", "", 1, "東京の天気は晴れです。明日は雨が降るでしょう。"),
		C("s1", "", 2, "Release 🚀 shipped on Friday 🎉"),
		C("s1", "", 3, "Москва — столица России."),
		C("s1", "", 4, "An unrelated English sentence."),
	)
	cases := []struct{ q, want string }{
		{"東京", "s1/1/0"},
		{"天気", "s1/1/0"},
		{"🚀 release", "s1/2/0"},
		{"столица", "s1/3/0"},
	}
	for _, tc := range cases {
		hs := text(t, ix, sess("s1", ""), tc.q, 5)
		if len(hs) == 0 || hs[0].Chunk.ID != tc.want {
			t.Errorf("query %q found %v, want %s first", tc.q, ids(hs), tc.want)
		}
	}
	// A query of symbols only, or of unpaired surrogates' replacement
	// characters, never fails.
	for _, q := range []string{"🚀🎉", "\uFFFD\uFFFD", "((( ]]] :::", `"unterminated`, "*", "-", "AND OR NOT", "\x00"} {
		text(t, ix, sess("s1", ""), q, 5)
	}
}

func testEmptyQuery(t *testing.T, o Opener) {
	ix := open(t, o)
	add(t, ix, C("s1", "", 1, "something"))
	for _, q := range []string{"", "   ", "\n\t"} {
		if hs := text(t, ix, sess("s1", ""), q, 5); len(hs) != 0 {
			t.Errorf("empty query %q found %v", q, ids(hs))
		}
	}
	hs, err := ix.SearchText(context.Background(), sess("s1", ""), "something", 0)
	if err != nil || len(hs) != 0 {
		t.Fatalf("k=0: %v hits, err %v; want none", ids(hs), err)
	}
}

// testLargeText indexes a 5 MB tool result, chunked by memory.Split, and
// finds a word that occurs once, near its end.
func testLargeText(t *testing.T, o Opener) {
	ix := open(t, o)
	var b strings.Builder
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
	for i := 0; b.Len() < 5<<20; i++ {
		b.WriteString(words[i%len(words)])
		b.WriteByte(' ')
		b.WriteString(words[(i*7/3)%len(words)])
		b.WriteString(".\n")
		if i == 120000 {
			b.WriteString("The needle word is quixotically.\n")
		}
	}
	parts := memory.Split(b.String(), 0)
	if strings.Join(parts, "") != b.String() {
		t.Fatal("Split lost text")
	}
	cs := make([]memory.Chunk, len(parts))
	for i, p := range parts {
		cs[i] = memory.Chunk{ID: memory.ChunkID("big", 7, i), SessionID: "big", Seq: 7, Part: i, Role: "tool", Tool: "read_file", Time: t0, Text: p}
	}
	add(t, ix, cs...)
	hs := text(t, ix, sess("big", ""), "quixotically", 3)
	if len(hs) != 1 || !strings.Contains(hs[0].Chunk.Text, "quixotically") || hs[0].Chunk.Tool != "read_file" {
		t.Fatalf("needle in a 5 MB text: found %v", ids(hs))
	}
	st, err := ix.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Chunks != int64(len(parts)) {
		t.Fatalf("Status.Chunks = %d, want %d", st.Chunks, len(parts))
	}
}

func vec(xs ...float32) []float32 { return xs }

func testVectors(t *testing.T, o Opener) {
	ix := open(t, o)
	ctx := context.Background()
	cs := []memory.Chunk{C("s1", "", 1, "north"), C("s1", "", 2, "east"), C("s1", "", 3, "north-east"), C("s1", "", 4, "no vector yet")}
	cs[0].Vector, cs[1].Vector, cs[2].Vector = vec(0, 1, 0), vec(1, 0, 0), vec(0.7, 0.7, 0)
	add(t, ix, cs...)
	s := sess("s1", "")
	hs, err := ix.SearchVector(ctx, s, vec(0.1, 2, 0), 10) // not unit length: cosine, not dot product
	if err != nil {
		t.Fatal(err)
	}
	checkHits(t, s, hs, 10)
	if fmt.Sprint(ids(hs)) != "[s1/1/0 s1/3/0 s1/2/0]" {
		t.Fatalf("nearest to north: %v, want [s1/1/0 s1/3/0 s1/2/0] (the chunk without a vector is not a hit)", ids(hs))
	}
	if hs[0].Source != memory.SourceVector {
		t.Fatalf("source %q, want vector", hs[0].Source)
	}
	if hs[0].Score < 0.99 || hs[0].Score > 1.0001 {
		t.Fatalf("cosine of near-parallel vectors scored %v, want about 1", hs[0].Score)
	}
	if hs, _ := ix.SearchVector(ctx, s, vec(1, 0, 0), 1); len(hs) != 1 || hs[0].Chunk.ID != "s1/2/0" {
		t.Fatalf("k=1 nearest to east: %v", ids(hs))
	}
	if _, err := ix.SearchVector(ctx, s, vec(1, 0), 3); !errors.Is(err, memory.ErrDimension) {
		t.Fatalf("query of another dimension: err %v, want ErrDimension", err)
	}
	// The vector attached later replaces the chunk, text kept.
	late := cs[3]
	late.Vector = vec(0, 0, 1)
	add(t, ix, late)
	if hs, _ := ix.SearchVector(ctx, s, vec(0, 0, 1), 1); len(hs) != 1 || hs[0].Chunk.ID != "s1/4/0" {
		t.Fatalf("late vector not found: %v", ids(hs))
	}
	if hs := text(t, ix, s, "vector", 5); len(hs) != 1 {
		t.Fatalf("text of a chunk whose vector came later: %v", ids(hs))
	}
}

func testVectorScope(t *testing.T, o Opener) {
	ix := open(t, o)
	a, b := C("a1", "alice", 1, "alpha"), C("b1", "bob", 1, "beta")
	a.Vector, b.Vector = vec(1, 0), vec(1, 0.01)
	add(t, ix, a, b)
	for _, s := range []memory.Scope{sess("a1", "alice"), {Kind: memory.ScopeOwner, Owner: "alice"}, {Kind: memory.ScopeWorkspace, Owner: "alice", Workspace: "/ws/alice"}} {
		hs, err := ix.SearchVector(context.Background(), s, vec(1, 0), 10)
		if err != nil {
			t.Fatal(err)
		}
		checkHits(t, s, hs, 10)
		if len(hs) != 1 || hs[0].Chunk.ID != "a1/1/0" {
			t.Fatalf("scope %+v: %v, want only alice's chunk", s, ids(hs))
		}
	}
}

func testBadVectors(t *testing.T, o Opener) {
	ix := open(t, o)
	ctx := context.Background()
	good := C("s1", "", 1, "good chunk")
	good.Vector = vec(1, 0, 0)
	add(t, ix, good)
	nan := C("s1", "", 2, "nan chunk")
	nan.Vector = vec(float32(math.NaN()), 0, 0)
	wrong := C("s1", "", 3, "wrong dimension chunk")
	wrong.Vector = vec(1, 0)
	badID := C("s1", "", 4, "bad id chunk")
	badID.ID = "forged"
	empty := C("s1", "", 5, "")
	for name, bad := range map[string]memory.Chunk{"NaN": nan, "dimension": wrong, "id": badID, "empty text": empty} {
		other := C("s1", "", 9, "innocent bystander "+name)
		if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{other, bad}, Marks: map[string]uint64{"s1": 9}}); err == nil {
			t.Errorf("Add of a chunk with a bad %s succeeded", name)
		}
		if hs := text(t, ix, sess("s1", ""), "bystander", 5); len(hs) != 0 {
			t.Errorf("a batch refused for a bad %s was partly written: %v", name, ids(hs))
		}
		if m, _ := ix.Mark(ctx, "s1"); m != 0 {
			t.Errorf("a batch refused for a bad %s moved the mark to %d", name, m)
		}
	}
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{wrong}}); !errors.Is(err, memory.ErrDimension) {
		t.Errorf("wrong dimension: err %v, want ErrDimension", err)
	}
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{nan}}); !errors.Is(err, memory.ErrBadVector) {
		t.Errorf("NaN: err %v, want ErrBadVector", err)
	}
}

func testMarks(t *testing.T, o Opener) {
	ix := open(t, o)
	ctx := context.Background()
	if m, err := ix.Mark(ctx, "s1"); err != nil || m != 0 {
		t.Fatalf("Mark of an unknown session = %d, %v", m, err)
	}
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{C("s1", "", 1, "one")}, Marks: map[string]uint64{"s1": 3}}); err != nil {
		t.Fatal(err)
	}
	// A batch of marks alone (messages with nothing to index).
	if err := ix.Add(ctx, memory.Batch{Marks: map[string]uint64{"s1": 5, "s2": 2}}); err != nil {
		t.Fatal(err)
	}
	for sid, want := range map[string]uint64{"s1": 5, "s2": 2, "s3": 0} {
		if m, err := ix.Mark(ctx, sid); err != nil || m != want {
			t.Errorf("Mark(%s) = %d, %v; want %d", sid, m, err, want)
		}
	}
}

func testPending(t *testing.T, o Opener) {
	ix := open(t, o)
	ctx := context.Background()
	withV := C("s1", "", 1, "has a vector")
	withV.Vector = vec(1, 0)
	add(t, ix, withV, C("s1", "", 2, "needs one"), C("s1", "", 3, "needs one too"), C("s2", "", 1, "and me"))
	p, err := ix.Pending(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(p))
	for i, c := range p {
		got[i] = c.ID
		if c.Text == "" {
			t.Fatalf("pending chunk %s without its text", c.ID)
		}
	}
	if fmt.Sprint(sorted(got)) != "[s1/2/0 s1/3/0 s2/1/0]" {
		t.Fatalf("Pending = %v", got)
	}
	if p, _ := ix.Pending(ctx, 2); len(p) != 2 {
		t.Fatalf("Pending(2) returned %d", len(p))
	}
	for _, c := range p {
		c.Vector = vec(0, 1)
		add(t, ix, c)
	}
	if p, _ := ix.Pending(ctx, 10); len(p) != 0 {
		t.Fatalf("Pending after embedding: %d left", len(p))
	}
}

func testReopen(t *testing.T, o Opener) {
	ix, err := o()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := C("s1", "", 1, "persistent marmalade recipe")
	c.Vector = vec(0, 1)
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{c}, Marks: map[string]uint64{"s1": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.SearchText(ctx, sess("s1", ""), "marmalade", 5); !errors.Is(err, memory.ErrClosed) {
		t.Errorf("search after Close: err %v, want ErrClosed", err)
	}
	ix = open(t, o)
	if hs := text(t, ix, sess("s1", ""), "marmalade", 5); len(hs) != 1 {
		t.Fatalf("after reopen: %v", ids(hs))
	}
	if hs, err := ix.SearchVector(ctx, sess("s1", ""), vec(0, 1), 5); err != nil || len(hs) != 1 {
		t.Fatalf("vector after reopen: %v, %v", ids(hs), err)
	}
	if m, _ := ix.Mark(ctx, "s1"); m != 1 {
		t.Fatalf("mark after reopen: %d", m)
	}
}

func testStatus(t *testing.T, o Opener) {
	ix := open(t, o)
	a, b := C("s1", "", 1, "a"), C("s2", "", 1, "b")
	a.Vector = vec(1, 2, 3, 4)
	add(t, ix, a, b)
	st, err := ix.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Backend == "" || st.Chunks != 2 || st.Vectors != 1 || st.Dimensions != 4 || st.Sessions != 2 {
		t.Fatalf("Status = %+v; want a backend name, 2 chunks, 1 vector of 4 dimensions, 2 sessions", st)
	}
}

// testConcurrent hammers Add, searches and deletes from several goroutines
// (run it under -race).
func testConcurrent(t *testing.T, o Opener) {
	ix := open(t, o)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("w%d", w)
			for i := 1; i <= 25; i++ {
				c := C(sid, "", uint64(i), fmt.Sprintf("worker %d wrote entry number %d about kiwis", w, i))
				c.Vector = vec(float32(w+1), float32(i))
				if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{c}, Marks: map[string]uint64{sid: uint64(i)}}); err != nil {
					errs <- err
					return
				}
				if _, err := ix.SearchText(ctx, memory.Scope{Kind: memory.ScopeOwner}, "kiwis", 5); err != nil {
					errs <- err
					return
				}
				if _, err := ix.SearchVector(ctx, sess(sid, ""), vec(1, 1), 5); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := 0; w < 4; w++ {
		sid := fmt.Sprintf("w%d", w)
		if m, _ := ix.Mark(ctx, sid); m != 25 {
			t.Fatalf("mark of %s = %d, want 25", sid, m)
		}
		if hs := text(t, ix, sess(sid, ""), "kiwis", 100); len(hs) != 25 {
			t.Fatalf("%s: %d chunks found, want 25", sid, len(hs))
		}
	}
}
