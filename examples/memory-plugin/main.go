// Command memory-plugin is an example memory provider: a subprocess plugin
// (the Go SDK, go-plugin, confined by the kernel's sandbox like any
// plugin) that serves memory's index over the SDK's Memory service
// (docs/memory.md, "Plugin interface").
//
// It keeps its chunks in a journal file in the directory given as its
// first argument (the only directory its grant may write), fsynced on
// every change, and searches them with an in-memory bleve index (BM25,
// English analyzer) rebuilt from the journal when it starts; vectors are
// compared exactly. A team's own memory service would put its client here
// instead. It links no kernel package: the SDK passes the kernel's JSON
// documents through, and this file declares the fields it reads.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/agentkernel/agentkernel/sdk"
)

// chunk is memory.Chunk's JSON.
type chunk struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	Owner     string    `json:"owner,omitempty"`
	Workspace string    `json:"workspace,omitempty"`
	Seq       uint64    `json:"seq"`
	Part      int       `json:"part"`
	Role      string    `json:"role"`
	Tool      string    `json:"tool,omitempty"`
	Time      string    `json:"time"`
	Text      string    `json:"text"`
	Vector    []float32 `json:"vector,omitempty"`
}

// scope is memory.Scope's JSON.
type scope struct {
	Kind      string `json:"kind"`
	SessionID string `json:"session_id,omitempty"`
	Owner     string `json:"owner,omitempty"`
	Workspace string `json:"workspace,omitempty"`
}

func (s scope) match(c *chunk) bool {
	if c.Owner != s.Owner {
		return false
	}
	switch s.Kind {
	case "session":
		return c.SessionID == s.SessionID
	case "owner":
		return true
	case "workspace":
		return c.Workspace == s.Workspace
	}
	return false
}

// hit is memory.Hit's JSON.
type hit struct {
	Chunk  chunk   `json:"chunk"`
	Score  float64 `json:"score"`
	Rank   int     `json:"rank"`
	Source string  `json:"source"`
}

// record is one journal line: a batch, or a session's deletion.
type record struct {
	Chunks []chunk           `json:"chunks,omitempty"`
	Marks  map[string]uint64 `json:"marks,omitempty"`
	Delete string            `json:"delete,omitempty"`
}

type provider struct {
	mu      sync.RWMutex
	journal *os.File
	chunks  map[string]*chunk
	marks   map[string]uint64
	dims    int
	text    bleve.Index
}

func fail(code, format string, args ...any) error {
	return &sdk.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func textMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	im.ScoringModel = bindex.BM25Scoring
	doc := bleve.NewDocumentStaticMapping()
	tf := bleve.NewTextFieldMapping()
	tf.Analyzer = en.AnalyzerName
	doc.AddFieldMappingsAt("text", tf)
	for _, f := range []string{"sid", "owner", "ws"} {
		kf := bleve.NewTextFieldMapping()
		kf.Analyzer = keyword.Name
		doc.AddFieldMappingsAt(f, kf)
	}
	im.DefaultMapping = doc
	return im
}

func open(dir string) (*provider, error) {
	text, err := bleve.NewMemOnly(textMapping())
	if err != nil {
		return nil, err
	}
	p := &provider{chunks: map[string]*chunk{}, marks: map[string]uint64{}, text: text}
	// One descriptor, opened without following a link: a link planted at
	// the journal's path is refused, never written through.
	path := filepath.Join(dir, "memory.journal")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	// Apply every whole line; a line a crash cut short (its batch was
	// never acknowledged) and anything after it is cut off the file,
	// so later appends follow the last good line.
	var good int64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			break
		}
		if err := p.apply(r); err != nil {
			f.Close()
			return nil, err
		}
		good += int64(len(sc.Bytes())) + 1
	}
	fi, err := f.Stat()
	if err == nil {
		switch {
		case fi.Size() > good:
			err = f.Truncate(good)
		case fi.Size() < good:
			// The last record is whole but its newline was not written:
			// end the line, so the next record starts its own.
			if _, err = f.Write([]byte("\n")); err == nil {
				err = f.Sync()
			}
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	p.journal = f
	return p, nil
}

// apply makes record r true in memory.
func (p *provider) apply(r record) error {
	if r.Delete != "" {
		for id, c := range p.chunks {
			if c.SessionID == r.Delete {
				delete(p.chunks, id)
				if err := p.text.Delete(id); err != nil {
					return err
				}
			}
		}
		delete(p.marks, r.Delete)
		return nil
	}
	b := p.text.NewBatch()
	for i := range r.Chunks {
		c := r.Chunks[i]
		if len(c.Vector) > 0 {
			p.dims = len(c.Vector)
		}
		p.chunks[c.ID] = &c
		if err := b.Index(c.ID, map[string]any{"text": c.Text, "sid": c.SessionID, "owner": "o:" + c.Owner, "ws": "w:" + c.Workspace}); err != nil {
			return err
		}
	}
	for sid, m := range r.Marks {
		p.marks[sid] = m
	}
	return p.text.Batch(b)
}

// write journals r (fsynced) and applies it.
func (p *provider) write(r record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := p.journal.Write(append(line, '\n')); err != nil {
		return err
	}
	if err := p.journal.Sync(); err != nil {
		return err
	}
	return p.apply(r)
}

func (p *provider) Index(ctx context.Context, method string, args []byte) ([]byte, error) {
	var a struct {
		record
		Scope     scope     `json:"scope"`
		Query     string    `json:"query"`
		Vector    []float32 `json:"vector"`
		K         int       `json:"k"`
		SessionID string    `json:"session_id"`
		Limit     int       `json:"limit"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fail("invalid", "%s: arguments: %v", method, err)
	}
	switch method {
	case "add":
		return nil, p.add(a.record)
	case "search_text":
		return p.searchText(a.Scope, a.Query, a.K)
	case "search_vector":
		return p.searchVector(a.Scope, a.Vector, a.K)
	case "mark":
		p.mu.RLock()
		defer p.mu.RUnlock()
		return json.Marshal(p.marks[a.SessionID])
	case "pending":
		return p.pending(a.Limit)
	case "delete_session":
		p.mu.Lock()
		defer p.mu.Unlock()
		return nil, p.write(record{Delete: a.SessionID})
	case "status":
		return p.status()
	case "close":
		p.mu.Lock()
		defer p.mu.Unlock()
		return nil, p.journal.Sync()
	}
	return nil, fail("invalid", "unknown method %q", method)
}

func (p *provider) add(r record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	dims := p.dims
	for _, c := range r.Chunks {
		if n := len(c.Vector); n > 0 {
			if dims != 0 && n != dims {
				return fail("dimension", "chunk %s: vector of %d dimensions, the index holds %d", c.ID, n, dims)
			}
			dims = n
		}
	}
	return p.write(record{Chunks: r.Chunks, Marks: r.Marks})
}

func checkScope(s scope) error {
	switch {
	case s.Kind == "session" && s.SessionID != "", s.Kind == "owner", s.Kind == "workspace" && s.Workspace != "":
		return nil
	}
	return fail("scope", "scope %+v cannot be searched", s)
}

func (p *provider) searchText(s scope, q string, k int) ([]byte, error) {
	if err := checkScope(s); err != nil {
		return nil, err
	}
	if strings.TrimSpace(q) == "" || k <= 0 {
		return []byte("[]"), nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	mq := bleve.NewMatchQuery(q)
	mq.SetField("text")
	terms := []string{"owner", "o:" + s.Owner}
	switch s.Kind {
	case "session":
		terms = append(terms, "sid", s.SessionID)
	case "workspace":
		terms = append(terms, "ws", "w:"+s.Workspace)
	}
	qs := []query.Query{mq}
	for i := 0; i < len(terms); i += 2 {
		tq := bleve.NewTermQuery(terms[i+1])
		tq.SetField(terms[i])
		qs = append(qs, tq)
	}
	req := bleve.NewSearchRequestOptions(bleve.NewConjunctionQuery(qs...), k, 0, false)
	req.SortBy([]string{"-_score", "_id"})
	res, err := p.text.Search(req)
	if err != nil {
		return nil, err
	}
	hits := []hit{}
	for _, h := range res.Hits {
		if c, ok := p.chunks[h.ID]; ok && s.match(c) {
			out := *c
			out.Vector = nil
			hits = append(hits, hit{Chunk: out, Score: h.Score, Rank: len(hits) + 1, Source: "text"})
		}
	}
	return json.Marshal(hits)
}

func (p *provider) searchVector(s scope, v []float32, k int) ([]byte, error) {
	if err := checkScope(s); err != nil {
		return nil, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.dims == 0 || k <= 0 || len(v) == 0 {
		return []byte("[]"), nil
	}
	if len(v) != p.dims {
		return nil, fail("dimension", "query vector of %d dimensions, the index holds %d", len(v), p.dims)
	}
	var hits []hit
	for _, c := range p.chunks {
		if len(c.Vector) != len(v) || !s.match(c) {
			continue
		}
		var dot, a, b float64
		for i := range v {
			dot += float64(v[i]) * float64(c.Vector[i])
			a += float64(v[i]) * float64(v[i])
			b += float64(c.Vector[i]) * float64(c.Vector[i])
		}
		score := 0.0
		if a > 0 && b > 0 {
			score = dot / math.Sqrt(a*b)
		}
		out := *c
		out.Vector = nil
		hits = append(hits, hit{Chunk: out, Score: score, Source: "vector"})
	}
	slices.SortFunc(hits, func(x, y hit) int {
		if c := cmp.Compare(y.Score, x.Score); c != 0 {
			return c
		}
		return cmp.Compare(x.Chunk.ID, y.Chunk.ID)
	})
	hits = hits[:min(k, len(hits))]
	for i := range hits {
		hits[i].Rank = i + 1
	}
	return json.Marshal(hits)
}

func (p *provider) pending(limit int) ([]byte, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := []chunk{}
	for _, c := range p.chunks {
		if len(c.Vector) == 0 {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, func(x, y chunk) int {
		if c := cmp.Compare(x.Time, y.Time); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return json.Marshal(out[:min(max(limit, 0), len(out))])
}

func (p *provider) status() ([]byte, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	st := map[string]any{"backend": "memory-plugin", "chunks": len(p.chunks), "bytes": -1, "dimensions": p.dims}
	var vectors int
	sessions := map[string]bool{}
	for _, c := range p.chunks {
		if len(c.Vector) > 0 {
			vectors++
		}
		sessions[c.SessionID] = true
	}
	for sid := range p.marks {
		sessions[sid] = true
	}
	st["vectors"], st["sessions"] = vectors, len(sessions)
	if fi, err := p.journal.Stat(); err == nil {
		st["bytes"] = fi.Size()
	}
	return json.Marshal(st)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: memory-plugin DIR (the directory its journal lives in; grant it rw)")
		os.Exit(2)
	}
	p, err := open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory-plugin:", err)
		os.Exit(1)
	}
	sdk.Plugin{Memory: p}.Serve()
}
