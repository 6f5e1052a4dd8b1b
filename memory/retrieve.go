package memory

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
)

// Embedder turns texts into vectors (memory.embeddings: an
// OpenAI-compatible /v1/embeddings server). One vector per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// RRFK is the constant of reciprocal rank fusion: a hit at rank r of a list
// adds 1/(RRFK+r). 60 is the value of the paper (Cormack, Clarke and
// Büttcher, 2009) and of the engines that use it. Why RRF: RATIONALE.md,
// "Memory: hybrid ranking by reciprocal rank fusion".
const RRFK = 60

// Retriever searches an index: full text always, vectors too when it has
// an Embedder, fused by reciprocal rank. It is safe for concurrent use.
type Retriever struct {
	Index    Index
	Embedder Embedder // nil: full text only
	// Report gets an embeddings fault once when it starts and once when
	// it ends; nil discards them.
	Report func(msg string)

	faulty atomic.Bool
}

// Search returns the k best chunks in s for q. When the embedder fails
// the search goes on with full text alone (the fault is reported once).
func (r *Retriever) Search(ctx context.Context, s Scope, q string, k int) ([]Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	text, err := r.Index.SearchText(ctx, s, q, 2*k)
	if err != nil {
		return nil, err
	}
	if r.Embedder == nil {
		return cut(text, k), nil
	}
	vs, err := r.Embedder.Embed(ctx, []string{q})
	if err == nil && len(vs) != 1 {
		err = fmt.Errorf("embeddings server returned %d vectors for 1 text", len(vs))
	}
	var vec []Hit
	if err == nil {
		if err = checkVector(vs[0]); err == nil {
			vec, err = r.Index.SearchVector(ctx, s, vs[0], 2*k)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if r.faulty.CompareAndSwap(false, true) && r.Report != nil {
			r.Report(fmt.Sprintf("memory: vector search failed (%v); searching full text only until it works again", err))
		}
		return cut(text, k), nil
	}
	if r.faulty.CompareAndSwap(true, false) && r.Report != nil {
		r.Report("memory: vector search works again")
	}
	return Fuse(k, text, vec), nil
}

func checkVector(v []float32) error {
	c := Chunk{ID: "q/0/0", SessionID: "q", Text: "q", Vector: v}
	return c.Validate()
}

func cut(hs []Hit, k int) []Hit {
	if len(hs) > k {
		hs = hs[:k]
	}
	return hs
}

// Fuse merges ranked lists by reciprocal rank fusion: a chunk's score is
// the sum over the lists that hold it of 1/(RRFK+rank). The k best come
// back, ranked from 1; Source is hybrid for a chunk found by more than one
// list. Ties keep the order of chunk IDs, so the result is deterministic.
func Fuse(k int, lists ...[]Hit) []Hit {
	type acc struct {
		hit   Hit
		score float64
		n     int
	}
	by := map[string]*acc{}
	for _, l := range lists {
		for i, h := range l {
			a := by[h.Chunk.ID]
			if a == nil {
				a = &acc{hit: h}
				by[h.Chunk.ID] = a
			}
			a.score += 1 / float64(RRFK+i+1)
			a.n++
		}
	}
	out := make([]Hit, 0, len(by))
	for _, a := range by {
		h := a.hit
		h.Score = a.score
		if a.n > 1 {
			h.Source = SourceHybrid
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Chunk.ID < out[j].Chunk.ID
	})
	out = cut(out, k)
	for i := range out {
		out[i].Rank = i + 1
	}
	return out
}
