package memorytest

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/memory"
)

// LoCoMoEnv names the environment variable that points the recall
// benchmarks at a copy of LoCoMo (the long-conversation memory benchmark
// of Maharana et al., 2024): a JSON file holding the list of samples
// (locomo10.json), a directory of one JSON sample each, or a zip of them.
// The data is CC BY-NC 4.0, so the repository does not ship it.
const LoCoMoEnv = "AGENTKERNEL_LOCOMO"

// Conversation is one LoCoMo sample: its turns, as chunks (one a turn,
// owner = the sample, session = the sample's session), and its questions.
type Conversation struct {
	ID        string
	Chunks    []memory.Chunk
	Questions []Question
}

// Question is a LoCoMo question and the chunk IDs of its evidence turns.
type Question struct {
	Text     string
	Evidence []string
	Category int
}

type locomoTurn struct {
	Speaker string `json:"speaker"`
	DiaID   string `json:"dia_id"`
	Text    string `json:"text"`
	Caption string `json:"blip_caption"`
}

type locomoQA struct {
	Question string          `json:"question"`
	Evidence []string        `json:"evidence"`
	Category json.RawMessage `json:"category"`
}

// LoadLoCoMo reads the LoCoMo data at path (LoCoMoEnv's forms).
func LoadLoCoMo(path string) ([]Conversation, error) {
	var blobs [][]byte
	var names []string
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, err
	case fi.IsDir():
		files, _ := filepath.Glob(filepath.Join(path, "*.json"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			blobs, names = append(blobs, b), append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
		}
	case strings.HasSuffix(path, ".zip"):
		z, err := zip.OpenReader(path)
		if err != nil {
			return nil, err
		}
		defer z.Close()
		for _, f := range z.File {
			if !strings.HasSuffix(f.Name, ".json") {
				continue
			}
			r, err := f.Open()
			if err != nil {
				return nil, err
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				return nil, err
			}
			blobs, names = append(blobs, b), append(names, strings.TrimSuffix(filepath.Base(f.Name), ".json"))
		}
	default:
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var list []json.RawMessage
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for i, s := range list {
			blobs, names = append(blobs, s), append(names, strconv.Itoa(i))
		}
	}
	var out []Conversation
	for i, b := range blobs {
		c, err := parseLoCoMo(names[i], b)
		if err != nil {
			return nil, fmt.Errorf("%s: sample %s: %w", path, names[i], err)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func parseLoCoMo(name string, b []byte) (Conversation, error) {
	var sample map[string]json.RawMessage
	if err := json.Unmarshal(b, &sample); err != nil {
		return Conversation{}, err
	}
	conv := sample
	if raw, ok := sample["conversation"]; ok {
		if err := json.Unmarshal(raw, &conv); err != nil {
			return Conversation{}, fmt.Errorf("conversation: %w", err)
		}
	}
	if raw, ok := sample["sample_id"]; ok {
		json.Unmarshal(raw, &name)
	}
	c := Conversation{ID: name}
	byDia := map[string]string{}
	t0 := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for n := 1; ; n++ {
		raw, ok := conv[fmt.Sprintf("session_%d", n)]
		if !ok {
			if _, more := conv[fmt.Sprintf("session_%d_date_time", n)]; more {
				continue
			}
			break
		}
		var turns []locomoTurn
		if err := json.Unmarshal(raw, &turns); err != nil {
			return Conversation{}, fmt.Errorf("session_%d: %w", n, err)
		}
		sid := fmt.Sprintf("%s-s%d", name, n)
		for i, t := range turns {
			text := t.Speaker + ": " + t.Text
			if t.Caption != "" {
				text += " [shares " + t.Caption + "]"
			}
			ch := memory.Chunk{ID: memory.ChunkID(sid, uint64(i+1), 0), SessionID: sid, Owner: name,
				Seq: uint64(i + 1), Role: "user", Time: t0.Add(time.Duration(n)*24*time.Hour + time.Duration(i)*time.Minute), Text: text}
			c.Chunks = append(c.Chunks, ch)
			byDia[t.DiaID] = ch.ID
		}
	}
	var qas []locomoQA
	if raw, ok := sample["qa"]; ok {
		if err := json.Unmarshal(raw, &qas); err != nil {
			return Conversation{}, fmt.Errorf("qa: %w", err)
		}
	}
	for _, qa := range qas {
		q := Question{Text: qa.Question}
		q.Category, _ = strconv.Atoi(strings.Trim(string(qa.Category), `"`))
		for _, e := range qa.Evidence {
			// Some evidence fields list several ids in one string.
			for _, id := range strings.FieldsFunc(e, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
				if ch, ok := byDia[id]; ok {
					q.Evidence = append(q.Evidence, ch)
				}
			}
		}
		if len(q.Evidence) > 0 && q.Text != "" {
			c.Questions = append(c.Questions, q)
		}
	}
	return c, nil
}

// RecallResult is Recall's measure: the mean, over questions, of the
// share of a question's evidence turns among the first k hits.
type RecallResult struct {
	Questions int
	At5, At10 float64
}

// RecallReport is RecallWith's measure: full text, and, with an
// embedder, vectors alone and both fused (memory.Retriever, RRF).
type RecallReport struct {
	Text, Vector, Hybrid RecallResult
}

// Recall indexes every conversation in ix (each its own owner) and asks
// every question in owner scope, full text only: the recall of the
// evidence turns at 5 and 10.
func Recall(ctx context.Context, ix memory.Index, convs []Conversation) (RecallResult, error) {
	r, err := RecallWith(ctx, ix, convs, nil)
	return r.Text, err
}

// recallBatch is how many turns go to the index (and the embedder) at
// once.
const recallBatch = 32

// RecallWith is Recall, and, when emb is not nil, the turns and
// questions are embedded by emb too and each question is also asked of
// the vectors alone and of memory.Retriever (full text and vectors fused
// by reciprocal rank).
func RecallWith(ctx context.Context, ix memory.Index, convs []Conversation, emb memory.Embedder) (RecallReport, error) {
	var r RecallReport
	for _, c := range convs {
		for i := 0; i < len(c.Chunks); i += recallBatch {
			batch := slices.Clone(c.Chunks[i:min(i+recallBatch, len(c.Chunks))])
			if emb != nil {
				texts := make([]string, len(batch))
				for j, ch := range batch {
					texts[j] = ch.Text
				}
				vs, err := emb.Embed(ctx, texts)
				if err != nil {
					return r, fmt.Errorf("embed %s's turns: %w", c.ID, err)
				}
				for j := range batch {
					batch[j].Vector = vs[j]
				}
			}
			if err := ix.Add(ctx, memory.Batch{Chunks: batch}); err != nil {
				return r, err
			}
		}
	}
	var ret *memory.Retriever
	if emb != nil {
		emb = &lastEmbedded{Embedder: emb}
		ret = &memory.Retriever{Index: ix, Embedder: emb}
	}
	for _, c := range convs {
		scope := memory.Scope{Kind: memory.ScopeOwner, Owner: c.ID}
		for _, q := range c.Questions {
			hits, err := ix.SearchText(ctx, scope, q.Text, 10)
			if err != nil {
				return r, err
			}
			r.Text.add(q, hits)
			if emb == nil {
				continue
			}
			vs, err := emb.Embed(ctx, []string{q.Text})
			if err != nil {
				return r, fmt.Errorf("embed a question of %s: %w", c.ID, err)
			}
			if hits, err = ix.SearchVector(ctx, scope, vs[0], 10); err != nil {
				return r, err
			}
			r.Vector.add(q, hits)
			if hits, err = ret.Search(ctx, scope, q.Text, 10); err != nil {
				return r, err
			}
			r.Hybrid.add(q, hits)
		}
	}
	r.Text.mean()
	r.Vector.mean()
	r.Hybrid.mean()
	return r, nil
}

// lastEmbedded remembers the last single text it embedded: RecallWith
// embeds a question for the vector search, and the Retriever asks again.
type lastEmbedded struct {
	memory.Embedder
	text string
	vec  []float32
}

func (l *lastEmbedded) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 1 && l.vec != nil && texts[0] == l.text {
		return [][]float32{l.vec}, nil
	}
	vs, err := l.Embedder.Embed(ctx, texts)
	if err == nil && len(texts) == 1 && len(vs) == 1 {
		l.text, l.vec = texts[0], vs[0]
	}
	return vs, err
}

// add counts one question: the shares of its evidence in hits' first 5
// and 10.
func (r *RecallResult) add(q Question, hits []memory.Hit) {
	in := func(k int) float64 {
		found := 0
		for _, e := range q.Evidence {
			for _, h := range hits[:min(k, len(hits))] {
				if h.Chunk.ID == e {
					found++
					break
				}
			}
		}
		return float64(found) / float64(len(q.Evidence))
	}
	r.At5 += in(5)
	r.At10 += in(10)
	r.Questions++
}

// mean turns add's sums into means.
func (r *RecallResult) mean() {
	if r.Questions > 0 {
		r.At5 /= float64(r.Questions)
		r.At10 /= float64(r.Questions)
	}
}
