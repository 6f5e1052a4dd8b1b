package openai

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/wire"
)

// FuzzAccumulate feeds arbitrary bytes to the SSE framing and the chunk
// accumulator, seeded with every recorded stream. Whatever the input, the
// result is a response or a *kernel.ProviderError, never a panic; a success
// always saw [DONE] or a finish reason, and what was emitted is what was
// returned.
func FuzzAccumulate(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	for _, path := range seeds {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: [DONE]"))
	f.Add([]byte("event: error\ndata: {\"error\":\"x\"}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}},{\"function\":{\"arguments\":\"}\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-1,\"id\":\"a\",\"function\":{\"name\":\"f\"}}]}}]}\r\n\r\ndata: [DONE]\r\n\r\n"))

	names, err := toolname.NewMap([]string{"fs.read_file", "fs.list_dir", "web.search", "get_weather"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c collector
		resp, err := readStream(context.Background(), bytes.NewReader(data), newAccumulator(names, c.emit), nil)
		if err != nil {
			var pe *kernel.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *kernel.ProviderError", err, err)
			}
			if pe.Message == "" {
				t.Fatalf("error %#v has no message", pe)
			}
			if errors.Is(err, ErrStreamCut) && !pe.Retryable {
				t.Fatal("a cut stream is not retryable")
			}
			return
		}
		if !bytes.Contains(data, []byte("[DONE]")) && resp.FinishReason == "" {
			t.Fatalf("success without [DONE] or a finish reason in the input: %+v", resp)
		}
		if got := c.text(kernel.DeltaText); got != resp.Message.Content {
			t.Fatalf("text deltas %q != content %q", got, resp.Message.Content)
		}
		if got := c.text(kernel.DeltaReasoning); got != resp.Message.Reasoning {
			t.Fatalf("reasoning deltas %q != reasoning %q", got, resp.Message.Reasoning)
		}
		for _, tc := range resp.Message.ToolCalls {
			if tc.Name == "" {
				t.Fatalf("a tool call without a name: %+v", tc)
			}
			if strings.Contains(tc.Name, "__") && names.Decode(tc.Name) != tc.Name {
				t.Fatalf("tool name %q was not decoded", tc.Name)
			}
		}
	})
}

// TestReadStreamReaderError checks that a failing body is returned as it is
// for Stream to classify, not mistaken for a clean end.
func TestReadStreamReaderError(t *testing.T) {
	boom := errors.New("connection reset by peer")
	body := io.MultiReader(strings.NewReader("data: {\"choices\":[]}\n\n"), errReader{boom})
	_, err := readStream(context.Background(), body, newAccumulator(toolname.Map{}, func(kernel.Delta) {}), nil)
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the reader's error", err)
	}
	if wire.TransportRetryable(err) {
		t.Error("a bare reader error (not a net or url error) is classified retryable")
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
