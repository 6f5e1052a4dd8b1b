package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/wire"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// TestStreamRecorded replays recorded streams and compares what Stream
// emitted and returned with testdata/<name>.golden.json. Each case also
// checks the property it exists for.
func TestStreamRecorded(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T, resp kernel.Response, c *collector)
	}{
		{"text", func(t *testing.T, resp kernel.Response, c *collector) {
			wantMessage(t, resp, "Hello! How can I help you today?", "")
			if len(c.deltas) != 9 {
				t.Errorf("%d deltas, want one per non-empty content chunk (9)", len(c.deltas))
			}
			if resp.FinishReason != "stop" || resp.Model != "gpt-4o-mini-2024-07-18" {
				t.Errorf("finish %q model %q", resp.FinishReason, resp.Model)
			}
		}},
		{"tool_call", func(t *testing.T, resp kernel.Response, c *collector) {
			wantCalls(t, resp, kernel.ToolCall{ID: "call_Zk3mW8qLr2VbN4xYt6Hs9PcA", Name: "get_weather", Arguments: `{"city":"Paris France","unit":"celsius"}`})
			if len(c.deltas) != 0 || resp.FinishReason != "tool_calls" {
				t.Errorf("deltas %v finish %q: want none and tool_calls", c.deltas, resp.FinishReason)
			}
		}},
		{"parallel_tool_calls", func(t *testing.T, resp kernel.Response, c *collector) {
			wantCalls(t, resp,
				kernel.ToolCall{ID: "call_4fJx1RkQ9sLmE2vTn7WbY0Hd", Name: "fs.read_file", Arguments: `{"path": "cmd/kernel/main.go"}`},
				kernel.ToolCall{ID: "call_8GmQ3pZ6vTcW1yKe5NsR2uLa", Name: "web.search", Arguments: `{"query": "go plugin grpc", "limit": 5}`})
			if resp.Usage.CachedInputTokens != 256 {
				t.Errorf("cached tokens %d, want 256", resp.Usage.CachedInputTokens)
			}
		}},
		{"parallel_interleaved", func(t *testing.T, resp kernel.Response, c *collector) {
			wantCalls(t, resp,
				kernel.ToolCall{ID: "chatcmpl-tool-a1", Name: "fs.list_dir", Arguments: `{"dir": "."}`},
				kernel.ToolCall{ID: "chatcmpl-tool-b2", Name: "fs.read_file", Arguments: `{"path": "go.mod"}`})
			if resp.Usage != (kernel.Usage{InputTokens: 402, OutputTokens: 46}) {
				t.Errorf("usage %+v", resp.Usage)
			}
		}},
		{"text_and_tool_call", func(t *testing.T, resp kernel.Response, c *collector) {
			wantMessage(t, resp, "I'll check the weather in Paris for you.", "")
			wantCalls(t, resp, kernel.ToolCall{ID: "call_Q1w2E3r4T5y6U7i8O9p0AsDf", Name: "get_weather", Arguments: `{"city":"Paris"}`})
		}},
		{"usage", func(t *testing.T, resp kernel.Response, c *collector) {
			want := kernel.Usage{InputTokens: 1840, OutputTokens: 512, CachedInputTokens: 1536, ReasoningTokens: 448}
			if resp.Usage != want {
				t.Errorf("usage %+v, want %+v", resp.Usage, want)
			}
		}},
		{"reasoning_content", func(t *testing.T, resp kernel.Response, c *collector) {
			wantMessage(t, resp, "9.8 is larger than 9.11.", "Okay, the user asks for 9.11 vs 9.8. 9.8 is larger.")
			if resp.Usage.ReasoningTokens != 82 || resp.Usage.InputTokens != 17 {
				t.Errorf("usage %+v", resp.Usage)
			}
			// All reasoning streams before the answer.
			if c.deltas[0].Kind != kernel.DeltaReasoning || c.deltas[len(c.deltas)-1].Kind != kernel.DeltaText {
				t.Errorf("delta order: %+v", c.deltas)
			}
		}},
		{"reasoning_openrouter", func(t *testing.T, resp kernel.Response, c *collector) {
			wantMessage(t, resp, "Goroutines hum,\nchannels carry quiet work—\nthe kernel waits.", "The user wants a haiku about Go.")
			if resp.Usage.ReasoningTokens != 38 {
				t.Errorf("usage %+v", resp.Usage)
			}
		}},
		{"ollama_tool_call", func(t *testing.T, resp kernel.Response, c *collector) {
			wantMessage(t, resp, "", "I should list the directory first.")
			wantCalls(t, resp, kernel.ToolCall{ID: "call_x7k2m9qp", Name: "fs.list_dir", Arguments: `{"dir":"."}`})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Raw(string(readFile(t, tt.name+".sse"))))
			p := localProvider(t, srv.URL(), Config{})
			var c collector
			resp, err := stream(t, context.Background(), p, userRequest("hi", offered), c.emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			// What was emitted is exactly what was returned.
			if got := c.text(kernel.DeltaText); got != resp.Message.Content {
				t.Errorf("text deltas %q != content %q", got, resp.Message.Content)
			}
			if got := c.text(kernel.DeltaReasoning); got != resp.Message.Reasoning {
				t.Errorf("reasoning deltas %q != reasoning %q", got, resp.Message.Reasoning)
			}
			if resp.Message.Role != kernel.RoleAssistant {
				t.Errorf("role %q", resp.Message.Role)
			}
			for _, tc := range resp.Message.ToolCalls {
				if !json.Valid([]byte(tc.Arguments)) {
					t.Errorf("call %s: arguments %q are not JSON", tc.Name, tc.Arguments)
				}
			}
			tt.check(t, resp, &c)
			checkGolden(t, tt.name+".golden.json", result{Deltas: c.golden(), Response: resp})
		})
	}
}

func wantMessage(t *testing.T, resp kernel.Response, content, reasoning string) {
	t.Helper()
	if resp.Message.Content != content {
		t.Errorf("content %q, want %q", resp.Message.Content, content)
	}
	if resp.Message.Reasoning != reasoning {
		t.Errorf("reasoning %q, want %q", resp.Message.Reasoning, reasoning)
	}
}

func wantCalls(t *testing.T, resp kernel.Response, want ...kernel.ToolCall) {
	t.Helper()
	got := resp.Message.ToolCalls
	if len(got) != len(want) {
		t.Fatalf("%d tool calls %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestStreamHTTPErrors checks the mapping of error responses, and that
// openai-go does not retry on its own.
func TestStreamHTTPErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		code      string
		message   string // a part of the message
		retryable bool
	}{
		{"400 bad request", 400, string(readFile(t, "error_400.json")), "invalid_type", "Invalid type for 'messages[1].content'", false},
		{"401 bad key", 401, string(readFile(t, "error_401.json")), "invalid_api_key", "Incorrect API key provided", false},
		{"403", 403, `{"error":{"message":"Project does not have access to model gpt-5","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, "model_not_found", "does not have access", false},
		{"404 ollama", 404, `{"error":"model \"llama9\" not found, try pulling it first"}`, "", `model "llama9" not found`, false},
		{"408", 408, `{"error":{"message":"Request timed out.","type":"timeout","param":null,"code":null}}`, "timeout", "Request timed out", true},
		{"409", 409, `{"error":{"message":"conflict","type":"conflict","param":null,"code":null}}`, "conflict", "conflict", true},
		{"422 vllm", 422, `{"object":"error","message":"[{'type': 'missing', 'loc': ('body', 'messages')}]","type":"BadRequestError","param":null,"code":422}`, "BadRequestError", "missing", false},
		{"400 o3-mini parallel_tool_calls", 400, string(readFile(t, "openai_o3-mini_unsupported_parameter.json")), "unsupported_parameter", "'parallel_tool_calls' is not supported", false},
		{"400 deepseek missing reasoning", 400, string(readFile(t, "deepseek_v3.2_missing_reasoning.json")), "invalid_request_error", "Missing `reasoning_content`", false},
		{"429 rate limit", 429, string(readFile(t, "error_429.json")), "rate_limit_exceeded", "Rate limit reached", true},
		{"429 quota", 429, string(readFile(t, "error_429_quota.json")), "insufficient_quota", "exceeded your current quota", false},
		{"500", 500, string(readFile(t, "error_500.json")), "server_error", "The server had an error", true},
		{"500 llama.cpp", 500, `{"error":{"code":500,"message":"failed to decode the prompt","type":"server_error"}}`, "server_error", "failed to decode", true},
		{"502 proxy html", 502, string(readFile(t, "error_502.html")), "", "502 Bad Gateway", true},
		{"503 empty", 503, "", "", "Service Unavailable", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				if strings.HasPrefix(tt.body, "{") {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			p := localProvider(t, srv.URL+"/v1", Config{})
			var c collector
			_, err := stream(t, context.Background(), p, userRequest("hi", nil), c.emit)
			pe := providerError(t, err)
			if pe.StatusCode != tt.status || pe.Code != tt.code || pe.Retryable != tt.retryable {
				t.Errorf("got status %d code %q retryable %v, want %d %q %v", pe.StatusCode, pe.Code, pe.Retryable, tt.status, tt.code, tt.retryable)
			}
			if !strings.Contains(pe.Message, tt.message) {
				t.Errorf("message %q does not contain %q", pe.Message, tt.message)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("%d requests, want 1: openai-go must not retry on its own", n)
			}
			if len(c.deltas) != 0 {
				t.Errorf("deltas %v emitted for an error", c.deltas)
			}
		})
	}
}

// TestStreamErrorEvents checks errors the server sends after the 200.
func TestStreamErrorEvents(t *testing.T) {
	tests := []struct {
		name, sse string
		code      string
		message   string
		retryable bool
	}{
		{"openrouter chunk", string(readFile(t, "error_midstream.sse")), "502", "upstream connection reset", true},
		{"error event", "event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"overloaded_error\"}}\n\n", "overloaded_error", "overloaded", true},
		{"bad request mid-stream", "data: {\"error\":{\"message\":\"prompt too long\",\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}\n\n", "context_length_exceeded", "prompt too long", false},
		{"finish_reason error", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hal\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"error\"}]}\n\ndata: [DONE]\n\n", "stream_error", `finish_reason "error" after 2 chunks`, true},
		{"json instead of a stream", "", "invalid_request_error", "stream is not supported", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h http.HandlerFunc
			if tt.sse == "" {
				h = func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.Write([]byte(`{"error":{"message":"stream is not supported","type":"invalid_request_error"}}`))
				}
			} else {
				h = func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					w.Write([]byte(tt.sse))
				}
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			p := localProvider(t, srv.URL+"/v1", Config{})
			_, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
			pe := providerError(t, err)
			if pe.Code != tt.code || pe.Retryable != tt.retryable || !strings.Contains(pe.Message, tt.message) {
				t.Errorf("got code %q retryable %v message %q; want %q %v ~%q", pe.Code, pe.Retryable, pe.Message, tt.code, tt.retryable, tt.message)
			}
		})
	}
}

// TestStreamMalformed checks that a chunk the protocol does not allow is a
// clear error naming the line and the field, never a panic or a skip.
func TestStreamMalformed(t *testing.T) {
	const pre = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	chunk := func(choice string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[` + choice + `]}` + "\n\n"
	}
	tests := []struct {
		name, sse string
		message   string
	}{
		{"recorded: broken JSON", string(readFile(t, "malformed.sse")), "malformed chunk at line 5: unexpected end of JSON input"},
		{"not an object", pre + "data: [1,2]\n\n", "line 3: the chunk is not a JSON object"},
		{"garbage", pre + "data: hello\n\n", "line 3: the chunk is not a JSON object"},
		{"choices not an array", pre + `data: {"choices":"x"}` + "\n\n", "choices must be an array"},
		{"choice not an object", pre + chunk(`7`), "choices must be an array, got"},
		{"content not a string", pre + chunk(`{"index":0,"delta":{"content":{"a":1}}}`), "choices[0].delta.content must be a string"},
		{"tool_calls not an array", pre + chunk(`{"index":0,"delta":{"tool_calls":{}}}`), "choices[0].delta.tool_calls must be an array"},
		{"tool call not an object", pre + chunk(`{"index":0,"delta":{"tool_calls":["x"]}}`), "choices[0].delta.tool_calls must be an array, got"},
		{"index not a number", pre + chunk(`{"index":0,"delta":{"tool_calls":[{"index":"zero","id":"a","function":{"name":"f"}}]}}`), `tool_calls[0].index must be an integer, got "\"zero\""`},
		{"index negative", pre + chunk(`{"index":0,"delta":{"tool_calls":[{"index":-3,"id":"a","function":{"name":"f"}}]}}`), "index -3 is negative"},
		{"index too large", pre + chunk(`{"index":0,"delta":{"tool_calls":[{"index":1000000,"id":"a","function":{"name":"f"}}]}}`), "index 1000000 is out of range"},
		{"arguments not a string", pre + chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":{"x":1}}}]}}`), "function.arguments must be a string"},
		{"reasoning not a string", pre + chunk(`{"index":0,"delta":{"reasoning_content":["x"]}}`), "delta.reasoning_content is not a string"},
		{"usage not an object", pre + `data: {"choices":[],"usage":"lots"}` + "\n\n", "usage must be an object"},
		{"usage negative", pre + `data: {"choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":1}}` + "\n\n", "usage.prompt_tokens is negative"},
		{"call without a name", pre + chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"arguments":"{}"}}]}}`) + "data: [DONE]\n\n", `tool call 0 (id "call_1") never got a function name`},
		{"done before any chunk", ": hi\n\ndata: [DONE]\n\n", "malformed stream: the stream ended with [DONE] before any chunk"},
		{"line too long", pre + "data: " + strings.Repeat("x", wire.MaxLine+10) + "\n\n", "line 3 of the event stream is longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Raw(tt.sse))
			p := localProvider(t, srv.URL(), Config{})
			_, err := stream(t, context.Background(), p, userRequest("hi", offered), nil)
			pe := providerError(t, err)
			if !errors.Is(err, ErrMalformedChunk) || pe.Code != "malformed_chunk" || pe.Retryable {
				t.Errorf("got %v (code %q retryable %v), want a non-retryable malformed_chunk", err, pe.Code, pe.Retryable)
			}
			if !strings.Contains(pe.Message, tt.message) {
				t.Errorf("message %q does not contain %q", pe.Message, tt.message)
			}
		})
	}
}

// TestStreamCut checks that a stream that ends before [DONE] is a retryable
// error and never a hang or a truncated success.
func TestStreamCut(t *testing.T) {
	for _, name := range []string{"cut", "cut_mid_event"} {
		t.Run(name, func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Raw(string(readFile(t, name+".sse"))))
			p := localProvider(t, srv.URL(), Config{})
			var c collector
			resp, err := stream(t, context.Background(), p, userRequest("hi", nil), c.emit)
			pe := providerError(t, err)
			if !errors.Is(err, ErrStreamCut) || pe.Code != "stream_cut" || !pe.Retryable {
				t.Errorf("got %v (code %q retryable %v), want a retryable stream_cut", err, pe.Code, pe.Retryable)
			}
			if resp.Message.Content != "" {
				t.Errorf("a cut stream returned content %q", resp.Message.Content)
			}
			if len(c.deltas) == 0 {
				t.Error("the deltas before the cut were not emitted")
			}
		})
	}

	// The server drops the TCP connection in the middle of the chunked body.
	t.Run("connection dropped", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.Write(readFile(t, "text.sse")[:600])
			http.NewResponseController(w).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // send a reset, not a clean close
			}
			conn.Close()
		}))
		defer srv.Close()
		p := localProvider(t, srv.URL+"/v1", Config{})
		_, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
		pe := providerError(t, err)
		if !pe.Retryable || (pe.Code != "stream_cut" && pe.Code != "connection") {
			t.Errorf("got %v (code %q retryable %v), want a retryable stream_cut or connection error", err, pe.Code, pe.Retryable)
		}
	})

	// The server stops sending but keeps the connection open.
	t.Run("stalled with IdleTimeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(readFile(t, "text.sse")[:600])
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		p := localProvider(t, srv.URL+"/v1", Config{IdleTimeout: 100 * time.Millisecond})
		_, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
		pe := providerError(t, err)
		if pe.Code != "stream_idle" || !pe.Retryable || !strings.Contains(pe.Message, "sent nothing for 100ms") {
			t.Errorf("got %v (code %q retryable %v), want a retryable stream_idle", err, pe.Code, pe.Retryable)
		}
	})

	t.Run("not an event stream", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body>Welcome to the hotel wifi</body></html>")
		}))
		defer srv.Close()
		p := localProvider(t, srv.URL+"/v1", Config{})
		_, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
		pe := providerError(t, err)
		if !errors.Is(err, ErrStreamCut) || !strings.Contains(pe.Message, `Content-Type is "text/html"`) {
			t.Errorf("got %v", err)
		}
	})

	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		p := localProvider(t, "http://"+addr+"/v1", Config{})
		_, err = stream(t, context.Background(), p, userRequest("hi", nil), nil)
		pe := providerError(t, err)
		if pe.Code != "connection" || !pe.Retryable || !strings.Contains(pe.Message, addr) {
			t.Errorf("got %v (code %q retryable %v), want a retryable connection error naming %s", err, pe.Code, pe.Retryable, addr)
		}
	})
}

// TestStreamDeadline checks that the caller's deadline ends a stalled stream.
func TestStreamDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(readFile(t, "text.sse")[:600])
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	p := localProvider(t, srv.URL+"/v1", Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := stream(t, ctx, p, userRequest("hi", nil), nil)
	pe := providerError(t, err)
	if !errors.Is(err, context.DeadlineExceeded) || pe.Code != "deadline_exceeded" || pe.Retryable {
		t.Errorf("got %v (code %q retryable %v)", err, pe.Code, pe.Retryable)
	}
}

// TestStreamCancel checks that cancelling ctx aborts a stream promptly,
// before the headers and in the middle of the body.
func TestStreamCancel(t *testing.T) {
	for _, when := range []string{"mid-stream", "before headers"} {
		t.Run(when, func(t *testing.T) {
			served := make(chan struct{})
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(served)
				io.Copy(io.Discard, r.Body)
				if when == "mid-stream" {
					w.Header().Set("Content-Type", "text/event-stream")
					w.Write(readFile(t, "text.sse")[:1200])
					http.NewResponseController(w).Flush()
				}
				select { // hold the stream open; only the client can end it
				case <-r.Context().Done():
				case <-release:
				}
			}))
			defer srv.Close()
			defer close(release)
			p := localProvider(t, srv.URL+"/v1", Config{})

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var c collector
			emit := c.emit
			if when == "mid-stream" {
				emit = func(d kernel.Delta) { c.emit(d); cancel() } // cancel at the first delta
			} else {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			_, err := stream(t, ctx, p, userRequest("hi", nil), emit)
			pe := providerError(t, err)
			if !errors.Is(err, context.Canceled) || pe.Code != "cancelled" || pe.Retryable {
				t.Errorf("got %v (code %q retryable %v), want a non-retryable cancellation", err, pe.Code, pe.Retryable)
			}
			if when == "mid-stream" && len(c.deltas) != 1 {
				t.Errorf("%d deltas after cancelling at the first", len(c.deltas))
			}
			select { // the server saw the client go away
			case <-served:
			case <-time.After(hangLimit):
				t.Fatal("the server's request never ended: the connection was not closed")
			}
		})
	}
}

// TestStreamConcurrent hammers one Provider from several goroutines under
// -race: a Provider is shared by every run of a kernel.
func TestStreamConcurrent(t *testing.T) {
	const workers, each = 8, 4
	sse := string(readFile(t, "parallel_tool_calls.sse"))
	steps := make([]openaitest.Step, workers*each)
	for i := range steps {
		steps[i] = openaitest.Raw(sse)
	}
	srv := openaitest.NewServer(t, steps...)
	p := localProvider(t, srv.URL(), Config{IdleTimeout: time.Minute})
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				resp, err := p.Stream(context.Background(), userRequest("hi", offered), nil)
				if err == nil && (len(resp.Message.ToolCalls) != 2 || resp.Message.ToolCalls[1].Name != "web.search") {
					err = fmt.Errorf("wrong response %+v", resp.Message)
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if srv.Remaining() != 0 {
		t.Errorf("%d steps not served", srv.Remaining())
	}
}
