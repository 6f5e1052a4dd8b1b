package openai

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
)

// BenchmarkStream is one whole Stream call against a local server that
// replays the recorded two-tool-call stream (28 chunks): request encoding,
// HTTP round trip on loopback, SSE framing, chunk decoding, accumulation.
func BenchmarkStream(b *testing.B) {
	sse := readFile(b, "parallel_tool_calls.sse")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	defer srv.Close()
	p := localProvider(b, srv.URL+"/v1", Config{})
	req := userRequest("Read main.go and search the web.", offered)
	ctx := context.Background()
	b.SetBytes(int64(len(sse)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Stream(ctx, req, func(kernel.Delta) {})
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Message.ToolCalls) != 2 {
			b.Fatalf("%d tool calls", len(resp.Message.ToolCalls))
		}
	}
}

// BenchmarkAccumulate is the decoding part of BenchmarkStream alone: SSE
// framing, chunk decoding and accumulation of the same recorded stream.
func BenchmarkAccumulate(b *testing.B) {
	sse := readFile(b, "parallel_tool_calls.sse")
	names, err := toolname.NewMap([]string{"fs.read_file", "web.search"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(int64(len(sse)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := readStream(ctx, bytes.NewReader(sse), newAccumulator(names, func(kernel.Delta) {}), nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Message.ToolCalls) != 2 {
			b.Fatalf("%d tool calls", len(resp.Message.ToolCalls))
		}
	}
}
