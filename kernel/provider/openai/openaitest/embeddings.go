package openaitest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// Embeddings is a deterministic fake of an OpenAI-compatible
// /v1/embeddings server: a "concept" embedding, so that tests can tell
// vector search from full-text search. Each word of a text that belongs to
// a concept of the lexicon (a group of synonyms, compared in lower case,
// with a trailing "s" also accepted) adds one to that concept's dimension;
// other words add nothing. The vector is normalised. A paraphrase made of
// synonyms is therefore near its original, and an identifier no lexicon
// holds embeds as the zero vector (found by full text only).
//
// Fault, when set, is asked before each request with its number (from
// 1) and may make the answer fail: an HTTP status, a delay, a wrong
// dimension or a NaN.
type Embeddings struct {
	srv     *httptest.Server
	dim     int
	concept map[string]int

	mu       sync.Mutex
	fault    func(n int) EmbedFault
	reject   func(text string) bool
	requests int
	texts    int
}

// EmbedFault is what Embeddings.Fault makes of one request.
type EmbedFault struct {
	Status    int           // answer with this HTTP status
	Delay     time.Duration // wait before answering (or until the client leaves)
	WrongDim  bool          // answer vectors of dim+1
	NaN       bool          // answer a vector holding a value JSON cannot carry (as a string)
	Malformed bool          // answer invalid JSON
}

// NewEmbeddings starts the fake with the concepts of lexicon (each a list
// of synonyms); its vectors have len(lexicon) dimensions.
func NewEmbeddings(t testing.TB, lexicon [][]string) *Embeddings {
	e := &Embeddings{dim: len(lexicon), concept: map[string]int{}}
	for i, group := range lexicon {
		for _, w := range group {
			e.concept[strings.ToLower(w)] = i
		}
	}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

// URL is the API root to configure (memory.embeddings.base_url).
func (e *Embeddings) URL() string { return e.srv.URL + "/v1" }

// Dim is the dimension of the vectors.
func (e *Embeddings) Dim() int { return e.dim }

// SetFault sets the fault function (nil: no faults).
func (e *Embeddings) SetFault(f func(n int) EmbedFault) {
	e.mu.Lock()
	e.fault = f
	e.mu.Unlock()
}

// SetReject makes every request holding a text reject reports fail with
// 400, as a server does for an input it cannot embed (too long for its
// context, say); nil rejects nothing.
func (e *Embeddings) SetReject(reject func(text string) bool) {
	e.mu.Lock()
	e.reject = reject
	e.mu.Unlock()
}

// Requests counts the requests served and Texts the texts embedded.
func (e *Embeddings) Requests() (requests, texts int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests, e.texts
}

// Vector is the embedding of text.
func (e *Embeddings) Vector(text string) []float64 {
	v := make([]float64, e.dim)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' }) {
		i, ok := e.concept[w]
		if !ok {
			i, ok = e.concept[strings.TrimSuffix(w, "s")]
		}
		if ok {
			v[i]++
		}
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	if n > 0 {
		n = math.Sqrt(n)
		for i := range v {
			v[i] /= n
		}
	}
	return v
}

func (e *Embeddings) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	var texts []string
	if err := json.Unmarshal(req.Input, &texts); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			http.Error(w, `{"error":{"message":"input must be a string or an array of strings"}}`, http.StatusBadRequest)
			return
		}
		texts = []string{one}
	}
	e.mu.Lock()
	e.requests++
	e.texts += len(texts)
	n, fault, reject := e.requests, e.fault, e.reject
	e.mu.Unlock()
	for _, t := range texts {
		if reject != nil && reject(t) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"input cannot be embedded","type":"invalid_request_error"}}`)
			return
		}
	}
	var f EmbedFault
	if fault != nil {
		f = fault(n)
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if f.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, `{"error":{"message":"fault %d","type":"server_error"}}`, f.Status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if f.Malformed {
		w.Write([]byte(`{"data":[{"embedding":[0.1,`))
		return
	}
	var b strings.Builder
	b.WriteString(`{"object":"list","model":`)
	m, _ := json.Marshal(req.Model)
	b.Write(m)
	b.WriteString(`,"data":[`)
	for i, t := range texts {
		v := e.Vector(t)
		if f.WrongDim {
			v = append(v, 0)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"object":"embedding","index":%d,"embedding":[`, i)
		for j, x := range v {
			if j > 0 {
				b.WriteByte(',')
			}
			if f.NaN && j == 0 {
				b.WriteString(`"NaN"`)
				continue
			}
			fmt.Fprintf(&b, "%g", x)
		}
		b.WriteString("]}")
	}
	fmt.Fprintf(&b, `],"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, len(texts), len(texts))
	w.Write([]byte(b.String()))
}
