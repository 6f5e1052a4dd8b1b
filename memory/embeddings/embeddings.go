// Package embeddings is memory's client of an OpenAI-compatible
// /v1/embeddings server (llama.cpp --embedding, Ollama, vLLM, OpenAI), on
// openai-go, dialling through the kernel's guarded egress client.
package embeddings

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/memory"
)

// Config is memory.embeddings.
type Config struct {
	// Model is the embeddings model the server is asked for.
	Model string
	// BaseURL is the server's API root ("http://127.0.0.1:8080/v1").
	BaseURL string
	// APIKeyEnv names the environment variable holding the key (empty:
	// no key, for a local server).
	APIKeyEnv string
	// Dimensions, when set, is asked of the server and every vector must
	// have it; else the first vector's dimension is kept and every later
	// one must match.
	Dimensions int
	// Timeout bounds one request (default 10s).
	Timeout time.Duration
	// HTTPClient makes the requests: the egress client (internal/egress)
	// in the kernel; nil is an error, so nothing dials unguarded.
	HTTPClient *http.Client
}

// ErrBadAnswer: the server answered, but not with one finite vector of
// the expected dimension per text.
var ErrBadAnswer = errors.New("embeddings: bad answer")

// Client is a memory.Embedder. It is safe for concurrent use.
type Client struct {
	cfg    Config
	client oa.Client
	dim    atomic.Int64 // the dimension seen first, when not configured
}

// New checks cfg and returns a client; it does not dial.
func New(cfg Config) (*Client, error) {
	if cfg.Model == "" {
		return nil, errors.New("memory.embeddings.model: empty (name the embeddings model)")
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("memory.embeddings.base_url: %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.Dimensions < 0 {
		return nil, fmt.Errorf("memory.embeddings.dimensions: %d is negative", cfg.Dimensions)
	}
	if cfg.HTTPClient == nil {
		return nil, errors.New("embeddings: no HTTP client (the egress client)")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimSuffix(cfg.BaseURL, "/") + "/"),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0), // the indexer retries
	}
	if cfg.APIKeyEnv != "" {
		key := os.Getenv(cfg.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("memory.embeddings.api_key_env: the environment variable %s is not set", cfg.APIKeyEnv)
		}
		opts = append(opts, option.WithAPIKey(key))
	}
	return &Client{cfg: cfg, client: oa.Client{Options: opts}}, nil
}

// Embed implements memory.Embedder: one vector per text, in order, each
// finite and of the configured dimension.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	p := oa.EmbeddingNewParams{Model: c.cfg.Model, Input: oa.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: oa.EmbeddingNewParamsEncodingFormatFloat}
	if c.cfg.Dimensions > 0 {
		p.Dimensions = oa.Int(int64(c.cfg.Dimensions))
	}
	svc := oa.NewEmbeddingService(c.client.Options...)
	res, err := svc.New(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("embeddings %s: %w", c.cfg.BaseURL, err)
	}
	if len(res.Data) != len(texts) {
		return nil, fmt.Errorf("%d vectors for %d texts: %w", len(res.Data), len(texts), ErrBadAnswer)
	}
	out := make([][]float32, len(texts))
	dim := c.cfg.Dimensions
	if dim == 0 {
		dim = int(c.dim.Load())
	}
	for _, d := range res.Data {
		if d.Index < 0 || int(d.Index) >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("vector index %d out of place: %w", d.Index, ErrBadAnswer)
		}
		if dim == 0 {
			dim = len(d.Embedding)
		}
		if len(d.Embedding) != dim || dim == 0 {
			return nil, fmt.Errorf("vector %d has %d dimensions, want %d: %w (memory.embeddings.dimensions)", d.Index, len(d.Embedding), dim, memory.ErrDimension)
		}
		v := make([]float32, dim)
		for i, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > math.MaxFloat32 {
				return nil, fmt.Errorf("vector %d holds %v at %d: %w", d.Index, x, i, memory.ErrBadVector)
			}
			v[i] = float32(x)
		}
		out[d.Index] = v
	}
	c.dim.CompareAndSwap(0, int64(dim))
	return out, nil
}

var _ memory.Embedder = (*Client)(nil)

// EgressClient returns the guarded HTTP client (internal/egress) that may
// reach baseURL's host and port only. A loopback or private address is a
// non-public range the egress dialer refuses unless granted: networks
// grants them (memory.embeddings.networks); "localhost" and a literal
// loopback address are granted their loopback range, since a local
// server (llama.cpp, Ollama) is the usual one.
func EgressClient(baseURL string, networks []netip.Prefix) (*http.Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("memory.embeddings.base_url: %q is not a URL", baseURL)
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	nets := append([]netip.Prefix(nil), networks...)
	if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
		nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
	} else if strings.EqualFold(host, "localhost") {
		nets = append(nets, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
	}
	return egress.NewClient(egress.Config{Hosts: []string{net.JoinHostPort(host, port)}, Networks: nets})
}
