package subprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// maxMemoryResult caps a memory provider's answer.
const maxMemoryResult = 64 << 20

// MemoryIndex returns the memory.Index the plugin named plugin provides
// (its Memory service; docs/memory.md, "Plugin interface"), started on
// first use like its tools, confined by the same grant. Closing the index
// tells the provider (close) and leaves the plugin to the host.
func (h *Host) MemoryIndex(plugin string) memory.Index {
	return &pluginIndex{h: h, plugin: plugin}
}

type pluginIndex struct {
	h      *Host
	plugin string
	closed atomic.Bool
}

var _ memory.Index = (*pluginIndex)(nil)

// codeErrors are the provider error codes that mean memory's errors.
var codeErrors = map[string]error{
	"scope": memory.ErrScope, "dimension": memory.ErrDimension, "bad_vector": memory.ErrBadVector, "closed": memory.ErrClosed,
}

// call runs method with args (JSON-encoded) and decodes the result into out.
func (p *pluginIndex) call(ctx context.Context, method string, args, out any) error {
	if p.closed.Load() {
		return memory.ErrClosed
	}
	in, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("memory plugin %s: %s: %w", p.plugin, method, err)
	}
	inst, err := p.h.running(ctx, p.plugin)
	if err != nil {
		return err
	}
	resp, err := inst.memory.Index(withTraceContext(ctx), &pluginpb.IndexRequest{Method: method, Args: in})
	switch {
	case err == nil:
	case status.Code(err) == codes.Unimplemented:
		return fmt.Errorf("plugin %s is no memory provider (it serves no Memory service)", p.plugin)
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		if stop, crash := inst.status(); crash != "" || stop != "" {
			return fmt.Errorf("memory plugin %s: %s: the plugin stopped (%w): %s", p.plugin, method, ErrCrashed, cut(crash+stop, 2048))
		}
		return fmt.Errorf("memory plugin %s: %s: %w", p.plugin, method, err)
	}
	if e := resp.GetError(); e != nil {
		msg := cut(e.GetMessage(), 4096)
		if known, ok := codeErrors[e.GetCode()]; ok {
			return fmt.Errorf("memory plugin %s: %s: %s: %w", p.plugin, method, msg, known)
		}
		return fmt.Errorf("memory plugin %s: %s: %s (%s)", p.plugin, method, msg, e.GetCode())
	}
	if len(resp.GetResult()) > maxMemoryResult {
		return fmt.Errorf("memory plugin %s: %s: the result is larger than 64 MiB", p.plugin, method)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.GetResult(), out); err != nil {
		return fmt.Errorf("memory plugin %s: %s: the result is not the method's JSON: %w", p.plugin, method, err)
	}
	return nil
}

// The methods' argument documents.
type (
	memAdd struct {
		Chunks []memory.Chunk    `json:"chunks"`
		Marks  map[string]uint64 `json:"marks,omitempty"`
	}
	memSearch struct {
		Scope  memory.Scope `json:"scope"`
		Query  string       `json:"query,omitempty"`
		Vector []float32    `json:"vector,omitempty"`
		K      int          `json:"k"`
	}
	memSession struct {
		SessionID string `json:"session_id"`
	}
	memLimit struct {
		Limit int `json:"limit"`
	}
)

func (p *pluginIndex) Add(ctx context.Context, b memory.Batch) error {
	// Validate here too: a provider's checks are its own, the interface's
	// are the kernel's.
	for i := range b.Chunks {
		if err := b.Chunks[i].Validate(); err != nil {
			return fmt.Errorf("memory plugin %s: %w", p.plugin, err)
		}
	}
	return p.call(ctx, "add", memAdd{Chunks: b.Chunks, Marks: b.Marks}, nil)
}

// hits checks the provider's hits: in scope (a provider's bug never shows
// another owner's chunk), ranked from 1, without vectors.
func (p *pluginIndex) hits(s memory.Scope, hs []memory.Hit) []memory.Hit {
	out := hs[:0]
	for _, h := range hs {
		if !s.Match(&h.Chunk) {
			continue
		}
		h.Chunk.Vector = nil
		h.Rank = len(out) + 1
		out = append(out, h)
	}
	return out
}

func (p *pluginIndex) SearchText(ctx context.Context, s memory.Scope, q string, k int) ([]memory.Hit, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var hs []memory.Hit
	if err := p.call(ctx, "search_text", memSearch{Scope: s, Query: q, K: k}, &hs); err != nil {
		return nil, err
	}
	return p.hits(s, hs), nil
}

func (p *pluginIndex) SearchVector(ctx context.Context, s memory.Scope, v []float32, k int) ([]memory.Hit, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := memory.Chunk{ID: "q/0/0", SessionID: "q", Text: "q", Vector: v}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("memory plugin %s: query vector: %w", p.plugin, memory.ErrBadVector)
	}
	var hs []memory.Hit
	if err := p.call(ctx, "search_vector", memSearch{Scope: s, Vector: v, K: k}, &hs); err != nil {
		return nil, err
	}
	return p.hits(s, hs), nil
}

func (p *pluginIndex) Mark(ctx context.Context, sessionID string) (uint64, error) {
	var m uint64
	err := p.call(ctx, "mark", memSession{SessionID: sessionID}, &m)
	return m, err
}

func (p *pluginIndex) Pending(ctx context.Context, limit int) ([]memory.Chunk, error) {
	var cs []memory.Chunk
	err := p.call(ctx, "pending", memLimit{Limit: limit}, &cs)
	return cs, err
}

func (p *pluginIndex) DeleteSession(ctx context.Context, sessionID string) error {
	return p.call(ctx, "delete_session", memSession{SessionID: sessionID}, nil)
}

func (p *pluginIndex) Status(ctx context.Context) (memory.Status, error) {
	var st memory.Status
	err := p.call(ctx, "status", struct{}{}, &st)
	return st, err
}

func (p *pluginIndex) Close() error {
	if p.closed.Load() {
		return nil
	}
	err := p.call(context.Background(), "close", struct{}{}, nil)
	p.closed.Store(true)
	return err
}

// servesMemory reports whether a plugin answers its Memory service.
func servesMemory(ctx context.Context, c pluginpb.MemoryClient) bool {
	resp, err := c.Index(ctx, &pluginpb.IndexRequest{Method: "status", Args: []byte("{}")})
	return err == nil && resp.GetError() == nil
}
