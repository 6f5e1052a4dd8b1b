// Package bleveindex is the memory.Index beside the Badger store (and, in
// memory, beside the memory store): full-text search by bleve (scorch,
// BM25, the English analyzer: unicode word segmentation, lower case, stop
// words, Porter stemming) and exact cosine search over vectors held in
// memory. Why bleve and why brute-force vectors: RATIONALE.md, "Memory:
// bleve beside Badger".
package bleveindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
	bolterr "go.etcd.io/bbolt/errors"

	"github.com/agentkernel/agentkernel/memory"
)

// Backend is Status.Backend.
const Backend = "bleve"

// Stored fields of a chunk document. Owner and workspace carry a prefix so
// that an empty value is still a term (an empty term matches nothing).
const (
	fKind  = "kind" // "chunk" or "mark"
	fText  = "text"
	fSID   = "sid"
	fOwner = "owner" // "o:" + owner
	fWS    = "ws"    // "w:" + workspace
	fRole  = "role"
	fTool  = "tool"
	fSeq   = "seq"
	fPart  = "part"
	fTime  = "time"
	fVec   = "vec" // little-endian float32s, as a string
	fMark  = "mark"
)

const markPrefix = "\x00mark/"

// Index is a memory.Index on bleve. It is safe for concurrent use: one
// writer at a time (Add, DeleteSession), searches in parallel.
type Index struct {
	path string

	mu     sync.RWMutex
	bl     bleve.Index
	closed bool
	docs   map[string]*meta // chunk ID → what searches filter on
	marks  map[string]uint64
	dim    int
	nvec   int64
	detail string
}

// meta is what the index keeps in memory of a chunk: its scope fields, its
// time and its vector.
type meta struct {
	sid, owner, ws string
	time           time.Time
	vec            []float32
	norm           float64
}

// Open opens the index in dir, creating it if absent; dir "" keeps the
// index in memory. An index that cannot be opened (a crash left it
// unreadable) is moved aside to dir+".broken-<time>" and a new, empty one
// is created: the indexer then indexes every session again (marks are
// gone), so the index is rebuilt, never silently wrong. Status.Detail says
// so.
func Open(dir string) (*Index, error) {
	ix := &Index{path: dir, docs: map[string]*meta{}, marks: map[string]uint64{}}
	var err error
	switch {
	case dir == "":
		ix.bl, err = bleve.NewMemOnly(indexMapping())
	default:
		ix.bl, err = bleve.OpenUsing(dir, map[string]any{"bolt_timeout": "2s"})
		if errors.Is(err, bolterr.ErrTimeout) {
			return nil, fmt.Errorf("memory index %s is in use by another kernel process (kernel serve?): %w", dir, err)
		}
		if errors.Is(err, bleve.ErrorIndexPathDoesNotExist) {
			if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
				return nil, fmt.Errorf("memory index %s: %w", dir, err)
			}
			ix.bl, err = bleve.New(dir, indexMapping())
		} else if err != nil {
			aside := fmt.Sprintf("%s.broken-%d", dir, time.Now().UnixNano())
			if rerr := os.Rename(dir, aside); rerr != nil {
				return nil, fmt.Errorf("memory index %s cannot be opened (%v) nor moved aside: %w", dir, err, rerr)
			}
			ix.detail = fmt.Sprintf("the index could not be opened (%v); it was moved to %s and is rebuilt from the sessions", err, aside)
			ix.bl, err = bleve.New(dir, indexMapping())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("memory index %s: %w", dir, err)
	}
	if err := ix.load(); err != nil {
		ix.bl.Close()
		return nil, fmt.Errorf("memory index %s: read: %w", dir, err)
	}
	return ix, nil
}

func indexMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	im.ScoringModel = bindex.BM25Scoring
	im.DefaultAnalyzer = en.AnalyzerName
	doc := bleve.NewDocumentStaticMapping()
	textField := bleve.NewTextFieldMapping()
	textField.Analyzer = en.AnalyzerName
	textField.Store = true
	textField.IncludeInAll = false
	textField.DocValues = false
	doc.AddFieldMappingsAt(fText, textField)
	for _, f := range []string{fKind, fSID, fOwner, fWS} {
		kf := bleve.NewTextFieldMapping()
		kf.Analyzer = keyword.Name
		kf.Store = true
		kf.IncludeInAll = false
		kf.IncludeTermVectors = false
		kf.DocValues = false
		doc.AddFieldMappingsAt(f, kf)
	}
	for _, f := range []string{fRole, fTool, fTime, fVec} {
		sf := bleve.NewTextFieldMapping()
		sf.Index = false
		sf.Store = true
		sf.IncludeInAll = false
		sf.DocValues = false
		doc.AddFieldMappingsAt(f, sf)
	}
	for _, f := range []string{fSeq, fPart, fMark} {
		nf := bleve.NewNumericFieldMapping()
		nf.Index = false
		nf.Store = true
		nf.IncludeInAll = false
		nf.DocValues = false
		doc.AddFieldMappingsAt(f, nf)
	}
	im.DefaultMapping = doc
	return im
}

// load reads every document's scope fields, time and vector, and every
// mark, into memory.
func (ix *Index) load() error {
	const page = 5000
	var after []string
	for {
		req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), page, 0, false)
		req.Fields = []string{fKind, fSID, fOwner, fWS, fTime, fVec, fMark}
		req.SortBy([]string{"_id"})
		if after != nil {
			req.SearchAfter = after
		}
		res, err := ix.bl.Search(req)
		if err != nil {
			return err
		}
		for _, h := range res.Hits {
			f := h.Fields
			if str(f[fKind]) == "mark" {
				ix.marks[str(f[fSID])] = uint64(num(f[fMark]))
				continue
			}
			m := &meta{sid: str(f[fSID]), owner: str(f[fOwner]), ws: str(f[fWS])}
			m.time, _ = time.Parse(time.RFC3339Nano, str(f[fTime]))
			if v := str(f[fVec]); v != "" {
				m.vec = decodeVec(v)
				m.norm = norm(m.vec)
				ix.dim = len(m.vec)
				ix.nvec++
			}
			ix.docs[h.ID] = m
		}
		if len(res.Hits) < page {
			return nil
		}
		after = []string{res.Hits[len(res.Hits)-1].ID}
	}
}

func str(v any) string  { s, _ := v.(string); return s }
func num(v any) float64 { f, _ := v.(float64); return f }

func encodeVec(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return string(b)
}

func decodeVec(s string) []float32 {
	v := make([]float32, len(s)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32([]byte(s[4*i : 4*i+4])))
	}
	return v
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// Add implements memory.Index.
func (ix *Index) Add(ctx context.Context, b memory.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return memory.ErrClosed
	}
	dim := ix.dim
	if ix.nvec == 0 {
		dim = 0
	}
	for i := range b.Chunks {
		c := &b.Chunks[i]
		if err := c.Validate(); err != nil {
			return err
		}
		if len(c.Vector) > 0 {
			if dim == 0 {
				dim = len(c.Vector)
			} else if len(c.Vector) != dim {
				return fmt.Errorf("chunk %q: vector of %d dimensions, the index holds %d: %w", c.ID, len(c.Vector), dim, memory.ErrDimension)
			}
		}
	}
	batch := ix.bl.NewBatch()
	for i := range b.Chunks {
		c := &b.Chunks[i]
		doc := map[string]any{
			fKind: "chunk", fText: c.Text, fSID: c.SessionID, fOwner: "o:" + c.Owner, fWS: "w:" + c.Workspace,
			fRole: c.Role, fTool: c.Tool, fSeq: float64(c.Seq), fPart: float64(c.Part), fTime: c.Time.UTC().Format(time.RFC3339Nano),
		}
		if len(c.Vector) > 0 {
			doc[fVec] = encodeVec(c.Vector)
		}
		if err := batch.Index(c.ID, doc); err != nil {
			return fmt.Errorf("chunk %q: %w", c.ID, err)
		}
	}
	for sid, m := range b.Marks {
		if err := batch.Index(markPrefix+sid, map[string]any{fKind: "mark", fSID: sid, fMark: float64(m)}); err != nil {
			return fmt.Errorf("mark of %q: %w", sid, err)
		}
	}
	if err := ix.bl.Batch(batch); err != nil {
		return fmt.Errorf("memory index: write: %w", err)
	}
	for i := range b.Chunks {
		c := &b.Chunks[i]
		if old := ix.docs[c.ID]; old != nil && old.vec != nil {
			ix.nvec--
		}
		m := &meta{sid: c.SessionID, owner: "o:" + c.Owner, ws: "w:" + c.Workspace, time: c.Time}
		if len(c.Vector) > 0 {
			m.vec = append([]float32(nil), c.Vector...)
			m.norm = norm(m.vec)
			ix.nvec++
		}
		ix.docs[c.ID] = m
	}
	if ix.nvec > 0 {
		ix.dim = dim
	}
	for sid, m := range b.Marks {
		ix.marks[sid] = m
	}
	return nil
}

// scopeQuery is the filter of s, as bleve term queries.
func scopeQuery(s memory.Scope) []query.Query {
	term := func(field, v string) query.Query {
		q := bleve.NewTermQuery(v)
		q.SetField(field)
		return q
	}
	qs := []query.Query{term(fOwner, "o:"+s.Owner), term(fKind, "chunk")}
	switch s.Kind {
	case memory.ScopeSession:
		qs = append(qs, term(fSID, s.SessionID))
	case memory.ScopeWorkspace:
		qs = append(qs, term(fWS, "w:"+s.Workspace))
	}
	return qs
}

func (m *meta) in(s memory.Scope) bool {
	if m.owner != "o:"+s.Owner {
		return false
	}
	switch s.Kind {
	case memory.ScopeSession:
		return m.sid == s.SessionID
	case memory.ScopeWorkspace:
		return m.ws == "w:"+s.Workspace
	}
	return true
}

var hitFields = []string{fText, fSID, fOwner, fWS, fRole, fTool, fSeq, fPart, fTime}

// SearchText implements memory.Index.
func (ix *Index) SearchText(ctx context.Context, s memory.Scope, q string, k int) ([]memory.Hit, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return nil, memory.ErrClosed
	}
	if strings.TrimSpace(q) == "" || k <= 0 {
		return nil, nil
	}
	sel, common, err := ix.splitCommon(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("memory search: %w", err)
	}
	if len(sel) == 0 {
		return nil, nil // nothing of the prompt survives analysis
	}
	var top query.Query = bleve.NewConjunctionQuery(append(scopeQuery(s), disjunction(sel))...)
	if len(common) > 0 {
		// Common terms rank (their score adds to a selected chunk's)
		// but do not select: Lucene's CommonTermsQuery.
		top = query.NewBooleanQuery([]query.Query{top}, []query.Query{disjunction(common)}, nil)
	}
	req := bleve.NewSearchRequestOptions(top, k, 0, false)
	req.Fields = hitFields
	req.SortBy([]string{"-_score", "_id"})
	res, err := ix.bl.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("memory search: %w", err)
	}
	hits := make([]memory.Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		hits = append(hits, memory.Hit{Chunk: chunkOf(h), Score: h.Score, Rank: len(hits) + 1, Source: memory.SourceText})
	}
	return hits, nil
}

// Common terms: a term of the prompt held by more than CommonShare of the
// index's documents, and by at least CommonMin of them, ranks but does not
// select (see splitCommon). CommonMin keeps small indexes, where every
// word is "common", searched by every term.
const (
	CommonShare = 0.01
	CommonMin   = 1000
)

// splitCommon analyses q as the text field is analysed and splits its
// terms into those that select chunks and the common ones, which only
// rank. A conversational prompt nearly always holds a word most chunks
// hold: selecting by it scores the whole scope (1.5 s at 100k chunks in
// one owner's scope). When every term is common, the rarest selects.
func (ix *Index) splitCommon(ctx context.Context, q string) (sel, common []string, err error) {
	an := ix.bl.Mapping().AnalyzerNamed(en.AnalyzerName)
	if an == nil {
		return nil, nil, fmt.Errorf("no analyzer %q", en.AnalyzerName)
	}
	seen := map[string]bool{}
	var terms []string
	for _, tok := range an.Analyze([]byte(q)) {
		if t := string(tok.Term); t != "" && !seen[t] {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return nil, nil, nil
	}
	adv, err := ix.bl.Advanced()
	if err != nil {
		return nil, nil, err
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	docs, err := r.DocCount()
	if err != nil {
		return nil, nil, err
	}
	limit := max(uint64(CommonShare*float64(docs)), CommonMin)
	rarest, rarestN := "", uint64(math.MaxUint64)
	for _, t := range terms {
		tfr, err := r.TermFieldReader(ctx, []byte(t), fText, false, false, false)
		if err != nil {
			return nil, nil, err
		}
		n := tfr.Count()
		tfr.Close()
		if n < rarestN {
			rarest, rarestN = t, n
		}
		if n >= limit {
			common = append(common, t)
		} else {
			sel = append(sel, t)
		}
	}
	if len(sel) == 0 {
		sel = []string{rarest}
		common = slices.DeleteFunc(common, func(t string) bool { return t == rarest })
	}
	return sel, common, nil
}

// disjunction matches any of the (analysed) terms in the text field.
func disjunction(terms []string) query.Query {
	qs := make([]query.Query, len(terms))
	for i, t := range terms {
		tq := bleve.NewTermQuery(t)
		tq.SetField(fText)
		qs[i] = tq
	}
	return bleve.NewDisjunctionQuery(qs...)
}

func chunkOf(h *search.DocumentMatch) memory.Chunk {
	f := h.Fields
	c := memory.Chunk{
		ID: h.ID, SessionID: str(f[fSID]), Owner: strings.TrimPrefix(str(f[fOwner]), "o:"), Workspace: strings.TrimPrefix(str(f[fWS]), "w:"),
		Seq: uint64(num(f[fSeq])), Part: int(num(f[fPart])), Role: str(f[fRole]), Tool: str(f[fTool]), Text: str(f[fText]),
	}
	c.Time, _ = time.Parse(time.RFC3339Nano, str(f[fTime]))
	return c
}

// SearchVector implements memory.Index: exact cosine similarity over the
// vectors in scope.
func (ix *Index) SearchVector(ctx context.Context, s memory.Scope, v []float32, k int) ([]memory.Hit, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	ix.mu.RLock()
	if ix.closed {
		ix.mu.RUnlock()
		return nil, memory.ErrClosed
	}
	if ix.nvec == 0 || k <= 0 {
		ix.mu.RUnlock()
		return nil, nil
	}
	if len(v) != ix.dim {
		ix.mu.RUnlock()
		return nil, fmt.Errorf("query vector of %d dimensions, the index holds %d: %w", len(v), ix.dim, memory.ErrDimension)
	}
	qn := norm(v)
	if qn == 0 { // no direction: nothing is near it
		ix.mu.RUnlock()
		return nil, nil
	}
	type scored struct {
		id    string
		score float64
	}
	var top []scored // best first, at most k
	for id, m := range ix.docs {
		if m.vec == nil || !m.in(s) {
			continue
		}
		var dot float64
		for i, x := range m.vec {
			dot += float64(x) * float64(v[i])
		}
		sc := 0.0
		if qn > 0 && m.norm > 0 {
			sc = dot / (qn * m.norm)
		}
		if len(top) == k && !better(sc, id, top[k-1].score, top[k-1].id) {
			continue
		}
		i := sort.Search(len(top), func(i int) bool { return better(sc, id, top[i].score, top[i].id) })
		if len(top) < k {
			top = append(top, scored{})
		}
		copy(top[i+1:], top[i:len(top)-1])
		top[i] = scored{id, sc}
	}
	ix.mu.RUnlock()
	if len(top) == 0 {
		return nil, nil
	}
	ids := make([]string, len(top))
	for i, t := range top {
		ids[i] = t.id
	}
	found, err := ix.fetch(ctx, ids)
	if err != nil {
		return nil, err
	}
	hits := make([]memory.Hit, 0, len(top))
	for _, t := range top {
		c, ok := found[t.id]
		if !ok { // deleted since
			continue
		}
		hits = append(hits, memory.Hit{Chunk: c, Score: t.score, Rank: len(hits) + 1, Source: memory.SourceVector})
	}
	return hits, nil
}

func better(s1 float64, id1 string, s2 float64, id2 string) bool {
	if s1 != s2 {
		return s1 > s2
	}
	return id1 < id2
}

// fetch reads the stored chunks of ids.
func (ix *Index) fetch(ctx context.Context, ids []string) (map[string]memory.Chunk, error) {
	req := bleve.NewSearchRequestOptions(bleve.NewDocIDQuery(ids), len(ids), 0, false)
	req.Fields = hitFields
	res, err := ix.bl.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("memory index: read chunks: %w", err)
	}
	out := make(map[string]memory.Chunk, len(res.Hits))
	for _, h := range res.Hits {
		out[h.ID] = chunkOf(h)
	}
	return out, nil
}

// Mark implements memory.Index.
func (ix *Index) Mark(ctx context.Context, sessionID string) (uint64, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return 0, memory.ErrClosed
	}
	return ix.marks[sessionID], nil
}

// Marks returns every session's mark, and 0 for a session that has
// chunks but no mark (for the indexer's reconciliation: memory.Marker).
func (ix *Index) Marks(ctx context.Context) (map[string]uint64, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return nil, memory.ErrClosed
	}
	out := make(map[string]uint64, len(ix.marks))
	for k, v := range ix.marks {
		out[k] = v
	}
	for _, m := range ix.docs {
		if _, ok := out[m.sid]; !ok {
			out[m.sid] = 0
		}
	}
	return out, nil
}

// Pending implements memory.Index.
func (ix *Index) Pending(ctx context.Context, limit int) ([]memory.Chunk, error) {
	ix.mu.RLock()
	if ix.closed {
		ix.mu.RUnlock()
		return nil, memory.ErrClosed
	}
	type p struct {
		id string
		t  time.Time
	}
	var ps []p
	for id, m := range ix.docs {
		if m.vec == nil {
			ps = append(ps, p{id, m.time})
		}
	}
	ix.mu.RUnlock()
	sort.Slice(ps, func(i, j int) bool {
		if !ps[i].t.Equal(ps[j].t) {
			return ps[i].t.Before(ps[j].t)
		}
		return ps[i].id < ps[j].id
	})
	if limit <= 0 || len(ps) == 0 {
		return nil, nil
	}
	if len(ps) > limit {
		ps = ps[:limit]
	}
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = ps[i].id
	}
	found, err := ix.fetch(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]memory.Chunk, 0, len(ids))
	for _, id := range ids {
		if c, ok := found[id]; ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// DeleteSession implements memory.Index.
func (ix *Index) DeleteSession(ctx context.Context, sessionID string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return memory.ErrClosed
	}
	batch := ix.bl.NewBatch()
	var gone []string
	for id, m := range ix.docs {
		if m.sid == sessionID {
			batch.Delete(id)
			gone = append(gone, id)
		}
	}
	if _, ok := ix.marks[sessionID]; ok || len(gone) > 0 {
		batch.Delete(markPrefix + sessionID)
	}
	if batch.Size() == 0 {
		return nil
	}
	if err := ix.bl.Batch(batch); err != nil {
		return fmt.Errorf("memory index: delete session %s: %w", sessionID, err)
	}
	for _, id := range gone {
		if ix.docs[id].vec != nil {
			ix.nvec--
		}
		delete(ix.docs, id)
	}
	delete(ix.marks, sessionID)
	if ix.nvec == 0 {
		ix.dim = 0
	}
	return nil
}

// Status implements memory.Index.
func (ix *Index) Status(ctx context.Context) (memory.Status, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.closed {
		return memory.Status{}, memory.ErrClosed
	}
	sessions := map[string]bool{}
	for _, m := range ix.docs {
		sessions[m.sid] = true
	}
	for sid := range ix.marks {
		sessions[sid] = true
	}
	st := memory.Status{Backend: Backend, Chunks: int64(len(ix.docs)), Vectors: ix.nvec, Sessions: int64(len(sessions)), Bytes: -1, Detail: ix.detail}
	if ix.nvec > 0 {
		st.Dimensions = ix.dim
	}
	if ix.path != "" {
		st.Bytes = dirSize(ix.path)
		if st.Detail == "" {
			st.Detail = ix.path
		}
	}
	return st, nil
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// Close implements memory.Index.
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	return ix.bl.Close()
}

var _ memory.Index = (*Index)(nil)
