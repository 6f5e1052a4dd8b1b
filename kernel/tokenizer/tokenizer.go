// Package tokenizer counts tokens with the OpenAI encodings o200k_base and
// cl100k_base. The vocabularies are compiled into the binary, compressed
// (o200k_base.vocab.zst, cl100k_base.vocab.zst: 1.4 MB where
// github.com/tiktoken-go/tokenizer's Go tables take 8.7 MB): nothing is
// downloaded at run time, and a vocabulary is decompressed into memory the
// first time its encoding counts, so a run whose model has no encoding
// never holds one.
//
// Counting is OpenAI's byte-pair encoding: the text is split by the
// encoding's pattern, and each piece that is not itself a token is merged
// pair by pair, lowest rank first. The tests hold it to tiktoken-go's
// counts (RATIONALE.md, "Token counting").
package tokenizer

import (
	"container/heap"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/dlclark/regexp2/v2"
	"github.com/klauspost/compress/zstd"

	// The split patterns' matchers, generated ahead (regexp2cg) and
	// registered by the package's init: several times faster than regexp2
	// interpreting the patterns. Only those: the package's own vocabulary
	// tables are never referenced here, so the linker leaves them out.
	_ "github.com/tiktoken-go/tokenizer/codec"

	"github.com/agentkernel/agentkernel/kernel"
)

// The encodings this package holds.
const (
	O200kBase  = "o200k_base"
	Cl100kBase = "cl100k_base"
)

//go:generate go run ./internal/vocabgen -o .

var (
	//go:embed o200k_base.vocab.zst
	o200kData []byte
	//go:embed cl100k_base.vocab.zst
	cl100kData []byte
)

// The split patterns, as tiktoken-go (and OpenAI's tiktoken) write them:
// the exact strings regexp2cg generated matchers for.
const (
	o200kPattern  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// Encoding is one tokenizer; it implements kernel.Tokenizer and is safe
// for concurrent use.
type Encoding struct {
	name    string
	data    []byte
	pattern string

	once  sync.Once
	ranks map[string]uint32
	split *regexp2.Regexp
	err   error
}

var (
	o200k  = &Encoding{name: O200kBase, data: o200kData, pattern: o200kPattern}
	cl100k = &Encoding{name: Cl100kBase, data: cl100kData, pattern: cl100kPattern}
)

// Get returns the encoding called name, or an error naming the ones there
// are.
func Get(name string) (*Encoding, error) {
	switch name {
	case O200kBase:
		return o200k, nil
	case Cl100kBase:
		return cl100k, nil
	}
	return nil, fmt.Errorf("unknown tokenizer %q (want %s or %s)", name, O200kBase, Cl100kBase)
}

// Name is the encoding's name.
func (e *Encoding) Name() string { return e.name }

// load decompresses the vocabulary and compiles the split pattern, once.
func (e *Encoding) load() {
	e.once.Do(func() {
		e.ranks, e.err = decodeVocab(e.data)
		if e.err != nil {
			e.err = fmt.Errorf("tokenizer %s: %w", e.name, e.err)
			return
		}
		// MustCompile, not Compile: only it picks up the generated
		// matcher (and regexp2's interpreter splits some whitespace runs
		// differently from it). The patterns are constants the tests
		// compile.
		e.split = regexp2.MustCompile(e.pattern, regexp2.None)
	})
}

// decodeVocab reads a vocabulary file (vocabgen): the tokens in rank
// order, each a uvarint length and its bytes, zstd-compressed. The map's
// keys share one string holding every token.
func decodeVocab(data []byte) (map[string]uint32, error) {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	raw, err := d.DecodeAll(data, nil)
	if err != nil {
		return nil, err
	}
	all := string(raw) // one copy, which every key points into
	ranks := make(map[string]uint32, len(raw)/7)
	for off, rank := 0, uint32(0); off < len(all); rank++ {
		n, w := binary.Uvarint(raw[off:])
		if w <= 0 || n > uint64(len(all)-off-w) {
			return nil, fmt.Errorf("vocabulary damaged at byte %d", off)
		}
		off += w
		ranks[all[off:off+int(n)]] = rank
		off += int(n)
	}
	return ranks, nil
}

// Count returns the number of tokens in text. Special-token text such as
// "<|endoftext|>" counts as ordinary text, as it does in a chat message.
func (e *Encoding) Count(text string) int {
	e.load()
	if e.err != nil {
		return (len(text) + 3) / 4 // cannot happen with the embedded data
	}
	n := 0
	m, err := e.split.FindStringMatch(text)
	for err == nil && m != nil {
		piece := m.String()
		if _, ok := e.ranks[piece]; ok {
			n++
		} else {
			n += e.mergeCount(piece)
		}
		m, err = e.split.FindNextMatch(m)
	}
	if err != nil { // a match timeout, which is not set
		return (len(text) + 3) / 4
	}
	return n
}

// mergeCount is how many tokens byte-pair encoding makes of piece: start
// from its bytes and merge the adjacent pair whose union has the lowest
// rank (the leftmost of equals) until no pair is a token. Boundaries are a
// linked list; the candidate merges a heap keyed by (rank, offset), stale
// entries skipped when popped.
func (e *Encoding) mergeCount(piece string) int {
	n := int32(len(piece))
	if n < 2 {
		return int(n)
	}
	next := make([]int32, n+1) // next[i]: the boundary after boundary i
	prev := make([]int32, n+1)
	rank := make([]uint32, n+1) // rank of merging the part at i with the one after it
	for i := range next {
		next[i], prev[i], rank[i] = int32(i)+1, int32(i)-1, noRank
	}
	next[n] = -1
	rankAt := func(i int32) uint32 {
		j := next[i]
		if j < 0 || next[j] < 0 {
			return noRank
		}
		if r, ok := e.ranks[piece[i:next[j]]]; ok {
			return r
		}
		return noRank
	}
	h := make(mergeHeap, 0, n)
	for i := int32(0); i+2 <= n; i++ {
		if r := rankAt(i); r != noRank {
			rank[i] = r
			h = append(h, candidate{r, i})
		}
	}
	heap.Init(&h)
	parts := int(n)
	for h.Len() > 0 {
		c := heap.Pop(&h).(candidate)
		if rank[c.at] != c.rank || next[c.at] < 0 {
			continue // stale: this boundary's merge changed since
		}
		j := next[c.at]
		k := next[j]
		next[c.at], rank[j], next[j] = k, noRank, -1
		if k >= 0 {
			prev[k] = c.at
		}
		parts--
		for _, b := range [2]int32{c.at, prev[c.at]} {
			if b < 0 {
				continue
			}
			if rank[b] = rankAt(b); rank[b] != noRank {
				heap.Push(&h, candidate{rank[b], b})
			}
		}
	}
	return parts
}

// noRank marks a boundary whose part cannot merge with the next.
const noRank = math.MaxUint32

type candidate struct {
	rank uint32
	at   int32
}

// mergeHeap orders candidates by rank, then offset: the lowest rank
// merges first, the leftmost of equal ranks (as tiktoken).
type mergeHeap []candidate

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	return h[i].rank < h[j].rank || h[i].rank == h[j].rank && h[i].at < h[j].at
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

var _ kernel.Tokenizer = (*Encoding)(nil)
