package memory_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/memory/embeddings"
)

// lexicon is the fake embeddings server's concepts: groups of synonyms.
var lexicon = [][]string{
	{"car", "automobile", "vehicle", "sedan"},
	{"buy", "bought", "purchase", "purchased", "acquire", "acquired"},
	{"red", "crimson", "scarlet"},
	{"sick", "ill", "unwell", "flu"},
	{"doctor", "physician", "clinic"},
	{"trip", "journey", "travel", "vacation", "holiday"},
	{"japan", "tokyo", "kyoto"},
	{"request", "call"},
	{"failed", "error", "crashed", "broke"},
}

func embedder(t *testing.T, e *openaitest.Embeddings) *embeddings.Client {
	t.Helper()
	hc, err := embeddings.EgressClient(e.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := embeddings.New(embeddings.Config{Model: "fake-embed", BaseURL: e.URL(), HTTPClient: hc, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hybridFixture indexes a conversation and embeds it; each query has one
// right answer.
func hybridFixture(t *testing.T) (memory.Index, *embeddings.Client) {
	t.Helper()
	srv := openaitest.NewEmbeddings(t, lexicon)
	emb := embedder(t, srv)
	ix, err := bleveindex.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	texts := []string{
		"Last spring we bought a crimson sedan for the family.", // 1: the paraphrase target
		"The request req_5d1b0a77 failed because the token expired.",
		"The request req_7f3a9c2e failed with a timeout on shard 12.", // 3: the identifier target
		"My daughter was unwell, so we saw the physician on Monday.",
		"Our holiday in Kyoto was lovely in autumn.",
		"A request to the billing service failed twice today.",
		"The automobile insurance renewal letter arrived.",
		"We talked about buying groceries for the week.",
	}
	ctx := context.Background()
	var cs []memory.Chunk
	for i, tx := range texts {
		c := memory.Chunk{ID: memory.ChunkID("s1", uint64(i+1), 0), SessionID: "s1", Seq: uint64(i + 1), Role: "user", Time: time.Unix(int64(i), 0), Text: tx}
		cs = append(cs, c)
	}
	if err := ix.Add(ctx, memory.Batch{Chunks: cs}); err != nil {
		t.Fatal(err)
	}
	in := memory.NewIndexer(memory.IndexerConfig{Index: ix, Embedder: emb})
	for {
		n, err := in.EmbedPending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	return ix, emb
}

// TestHybridBeatsEitherHalf: a paraphrase (no word in common with its
// target) only vectors find; an identifier (that no embedding knows) only
// full text finds; hybrid ranking finds both in its top 2.
func TestHybridBeatsEitherHalf(t *testing.T) {
	ix, emb := hybridFixture(t)
	ctx := context.Background()
	s := memory.Scope{Kind: memory.ScopeSession, SessionID: "s1"}
	cases := []struct {
		name, query, want   string
		textFinds, vecFinds bool
	}{
		{"paraphrase", "Which red automobile did we purchase?", "s1/1/0", false, true},
		{"identifier", "what happened to req_7f3a9c2e", "s1/3/0", true, false},
	}
	const k = 2
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, err := ix.SearchText(ctx, s, tc.query, k)
			if err != nil {
				t.Fatal(err)
			}
			vs, err := emb.Embed(ctx, []string{tc.query})
			if err != nil {
				t.Fatal(err)
			}
			vec, err := ix.SearchVector(ctx, s, vs[0], k)
			if err != nil {
				t.Fatal(err)
			}
			hybrid, err := (&memory.Retriever{Index: ix, Embedder: emb}).Search(ctx, s, tc.query, k)
			if err != nil {
				t.Fatal(err)
			}
			if got := top(text, k, tc.want); got != tc.textFinds {
				t.Errorf("full text alone finds %s in its top %d: %v (%v); the fixture needs %v", tc.want, k, got, ids(text), tc.textFinds)
			}
			if got := top(vec, k, tc.want); got != tc.vecFinds {
				t.Errorf("vectors alone find %s in their top %d: %v (%v); the fixture needs %v", tc.want, k, got, ids(vec), tc.vecFinds)
			}
			if !top(hybrid, k, tc.want) {
				t.Errorf("hybrid misses %s in its top %d: %v", tc.want, k, ids(hybrid))
			}
		})
	}
}

func top(hs []memory.Hit, k int, id string) bool {
	for i, h := range hs {
		if i < k && h.Chunk.ID == id {
			return true
		}
	}
	return false
}

func ids(hs []memory.Hit) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Chunk.ID)
	}
	return out
}

// TestEmbeddingsFaults: a server that is down, slow, answers the wrong
// dimension, a NaN or broken JSON fails the embedding with an error that
// says so; the retriever then searches full text alone and reports the
// fault once, and again once when it works again; the indexer's backlog
// waits and is embedded when the server recovers.
func TestEmbeddingsFaults(t *testing.T) {
	srv := openaitest.NewEmbeddings(t, lexicon)
	c := embedder(t, srv)
	ctx := context.Background()
	if _, err := c.Embed(ctx, []string{"a red car"}); err != nil {
		t.Fatal(err)
	}
	faults := []struct {
		name string
		f    openaitest.EmbedFault
		is   error
		has  string
	}{
		{"down", openaitest.EmbedFault{Status: http.StatusServiceUnavailable}, nil, "503"},
		{"slow", openaitest.EmbedFault{Delay: 5 * time.Second}, context.DeadlineExceeded, ""},
		{"wrong dimension", openaitest.EmbedFault{WrongDim: true}, memory.ErrDimension, ""},
		{"NaN", openaitest.EmbedFault{NaN: true}, nil, ""},
		{"malformed", openaitest.EmbedFault{Malformed: true}, nil, ""},
	}
	for _, tc := range faults {
		t.Run(tc.name, func(t *testing.T) {
			srv.SetFault(func(int) openaitest.EmbedFault { return tc.f })
			defer srv.SetFault(nil)
			_, err := c.Embed(ctx, []string{"a red car"})
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err %v, want %v", err, tc.is)
			}
			if tc.has != "" && !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("err %v does not say %s", err, tc.has)
			}
		})
	}

	// The retriever goes on with full text and says so once.
	ix, err := bleveindex.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := memory.Scope{Kind: memory.ScopeSession, SessionID: "s1"}
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{{ID: "s1/1/0", SessionID: "s1", Seq: 1, Role: "user", Text: "we bought a red car"}}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reports []string
	report := func(m string) { mu.Lock(); reports = append(reports, m); mu.Unlock() }
	r := &memory.Retriever{Index: ix, Embedder: c, Report: report}
	srv.SetFault(func(int) openaitest.EmbedFault { return openaitest.EmbedFault{Status: 500} })
	for i := 0; i < 3; i++ {
		hs, err := r.Search(ctx, s, "red car", 3)
		if err != nil || len(hs) != 1 {
			t.Fatalf("search with the embeddings server down: %v, %v", ids(hs), err)
		}
	}
	srv.SetFault(nil)
	// The indexer embeds the backlog once the server answers.
	in := memory.NewIndexer(memory.IndexerConfig{Index: ix, Embedder: c, Report: report})
	if n, err := in.EmbedPending(ctx); err != nil || n != 1 {
		t.Fatalf("backlog after recovery: %d embedded, %v", n, err)
	}
	if _, err := r.Search(ctx, s, "red car", 3); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 2 || !strings.Contains(reports[0], "full text only") || !strings.Contains(reports[1], "works again") {
		t.Fatalf("reports %q: want the fault once, then its end once", reports)
	}
}
