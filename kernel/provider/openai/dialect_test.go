package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/wire"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// TestDialectToolCalls replays the recorded tool-call dialects of real
// servers (testdata/<server>_<version>_*.sse) and checks the assembled calls.
func TestDialectToolCalls(t *testing.T) {
	tests := []struct {
		fixture string
		want    []kernel.ToolCall
		finish  string
	}{
		// Ollama 0.20: index 0 on every parallel call; the ids tell them apart.
		{"ollama_0.20_parallel_index0.sse", []kernel.ToolCall{
			{ID: "call_k3v9x2ab", Name: "fs.list_dir", Arguments: `{"dir":"."}`},
			{ID: "call_p8d1m7qz", Name: "fs.read_file", Arguments: `{"path":"notes.txt"}`},
		}, "tool_calls"},
		{"ollama_0.20_same_name_index0.sse", []kernel.ToolCall{
			{ID: "call_a1", Name: "fs.read_file", Arguments: `{"path":"a.txt"}`},
			{ID: "call_b2", Name: "fs.read_file", Arguments: `{"path":"b.txt"}`},
		}, "tool_calls"},
		// Ollama 0.4.6: no index at all, and finish_reason "stop" with calls.
		{"ollama_0.4.6_no_index_stop.sse", []kernel.ToolCall{
			{ID: "call_w4u2", Name: "get_weather", Arguments: `{"city":"Paris"}`},
			{ID: "call_z9q1", Name: "get_weather", Arguments: `{"city":"Lyon"}`},
		}, "stop"},
		// vLLM 0.8: continuation fragments with an empty name.
		{"vllm_0.8_empty_name_continuation.sse", []kernel.ToolCall{
			{ID: "chatcmpl-tool-5a1", Name: "web.search", Arguments: `{"query": "go plugin", "limit": 3}`},
		}, "tool_calls"},
		{"numeric_ids_no_index.sse", []kernel.ToolCall{
			{ID: "0", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
			{ID: "1", Name: "get_weather", Arguments: `{"city":"Bergen"}`},
		}, "tool_calls"},
		{"deepseek_v3.2_thinking_tool_call.sse", []kernel.ToolCall{
			{ID: "call_00_Yp8DmK2vNw1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		}, "tool_calls"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.fixture, ".sse"), func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Raw(string(readFile(t, tt.fixture))))
			p := localProvider(t, srv.URL(), Config{})
			resp, err := stream(t, context.Background(), p, userRequest("hi", offered), nil)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			wantCalls(t, resp, tt.want...)
			if resp.FinishReason != tt.finish {
				t.Errorf("finish %q, want %q", resp.FinishReason, tt.finish)
			}
		})
	}
}

// TestDialectStreamErrors: every known in-stream error shape is a
// ProviderError carrying the server's message, never a malformed stream or
// an empty success.
func TestDialectStreamErrors(t *testing.T) {
	tests := []struct {
		fixture   string
		code      string
		message   string
		retryable bool
	}{
		{"llamacpp_b3600_error_line.sse", "server_error", "Input prompt is too big compared to KV size", true},
		{"llamacpp_b3600_error_line_after_text.sse", "server_error", "slot unavailable", true},
		{"llamacpp_b6000_error_context.sse", "exceed_context_size_error", "exceeds the available context size", false},
		{"vllm_0.6_error_object.sse", "InternalServerError", "CUDA out of memory", true},
		{"vllm_0.11_error_bad_request.sse", "BadRequestError", "maximum context length is 32768", false},
		{"openai_2025_error_in_stream.sse", "server_error", "The server had an error", true},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.fixture, ".sse"), func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Raw(string(readFile(t, tt.fixture))))
			p := localProvider(t, srv.URL(), Config{})
			_, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
			pe := providerError(t, err)
			if pe.Code != tt.code || pe.Retryable != tt.retryable || !strings.Contains(pe.Message, tt.message) {
				t.Errorf("got code %q retryable %v message %q; want %q %v ~%q", pe.Code, pe.Retryable, pe.Message, tt.code, tt.retryable, tt.message)
			}
		})
	}
}

// TestDialectJSONBody: a server that answers the streaming request with a
// whole chat.completion is read as one.
func TestDialectJSONBody(t *testing.T) {
	body := readFile(t, "llamacpp_b6000_json_body.json")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Write(body)
	}))
	defer ts.Close()
	p := localProvider(t, ts.URL+"/v1", Config{})
	var c collector
	resp, err := stream(t, context.Background(), p, userRequest("hi", offered), c.emit)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	wantMessage(t, resp, "Checking.", "Need the file.")
	wantCalls(t, resp, kernel.ToolCall{ID: "Qf0bWc1d2e3f", Name: "fs.read_file", Arguments: `{"path":"go.mod"}`})
	if resp.Usage.InputTokens != 180 || resp.Usage.OutputTokens != 22 || resp.Message.ReasoningField != "reasoning_content" {
		t.Errorf("usage %+v field %q", resp.Usage, resp.Message.ReasoningField)
	}
	if c.text(kernel.DeltaText) != "Checking." || c.text(kernel.DeltaReasoning) != "Need the file." {
		t.Errorf("deltas %+v", c.deltas)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"seconds", http.Header{"Retry-After": {"1"}}, time.Second},
		{"fraction", http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{"http date", http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{"date in the past", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"milliseconds win", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}}, 250 * time.Millisecond},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"absent", http.Header{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.RetryAfter(tt.h, now); got != tt.want {
				t.Errorf("retryAfter = %s, want %s", got, tt.want)
			}
		})
	}

	// On the wire: the 429's header reaches the ProviderError.
	srv := openaitest.NewServer(t, openaitest.Step{Status: 429, Body: string(readFile(t, "error_429.json")), Header: http.Header{"Retry-After": {"2"}}})
	p := localProvider(t, srv.URL(), Config{})
	_, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
	if pe := providerError(t, err); pe.RetryAfter != 2*time.Second || pe.StatusCode != 429 {
		t.Errorf("RetryAfter %s status %d", pe.RetryAfter, pe.StatusCode)
	}
}

// TestRequestShaping: parallel_tool_calls, tool_choice and reasoning_effort
// go out only when set, per model.
func TestRequestShaping(t *testing.T) {
	yes, no := true, false
	cfg := Config{
		Request: RequestOptions{ParallelToolCalls: &yes, ToolChoice: "auto"},
		Models: map[string]RequestOptions{
			// o-series: answers 400 unsupported_parameter to parallel_tool_calls.
			"o3-mini":   {ReasoningEffort: "high"},
			"gpt-4.1":   {ParallelToolCalls: &no, ToolChoice: "fs.read_file"},
			"unshaped":  {},
			"forced-no": {ToolChoice: "none"},
		},
	}
	// o3-mini's override leaves parallel_tool_calls at the default; to send
	// nothing for it, the default must be unset. Two providers show both.
	unset := Config{Models: map[string]RequestOptions{"o3-mini": {ReasoningEffort: "high"}}}
	tests := []struct {
		name     string
		cfg      Config
		model    string
		tools    []kernel.ToolSpec
		parallel string // raw value sent, "" for absent
		choice   string
		effort   string
	}{
		{"o-series sends no parallel_tool_calls", unset, "o3-mini", offered, "", "", "high"},
		{"default options", cfg, "gpt-4o", offered, "true", `"auto"`, ""},
		{"per-model override", cfg, "gpt-4.1", offered, "false", `{"function":{"name":"fs__read_file"},"type":"function"}`, ""},
		{"no tools: no tool fields", cfg, "gpt-4o", nil, "", "", ""},
		{"override keeps unset fields", cfg, "forced-no", offered, "true", `"none"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Text("ok"))
			p := localProvider(t, srv.URL(), tt.cfg)
			req := userRequest("hi", tt.tools)
			req.Model = tt.model
			if _, err := stream(t, context.Background(), p, req, nil); err != nil {
				t.Fatal(err)
			}
			f := srv.Requests()[0].Fields
			for key, want := range map[string]string{"parallel_tool_calls": tt.parallel, "tool_choice": tt.choice, "reasoning_effort": tt.effort} {
				got := string(f[key])
				if key == "reasoning_effort" && want != "" {
					want = `"` + want + `"`
				}
				if got != want {
					t.Errorf("%s = %s, want %s", key, orAbsent(got), orAbsent(want))
				}
			}
		})
	}

	t.Run("forced tool not offered this turn", func(t *testing.T) {
		srv := openaitest.NewServer(t, openaitest.Text("ok"))
		p := localProvider(t, srv.URL(), Config{Request: RequestOptions{ToolChoice: "not.offered"}})
		if _, err := stream(t, context.Background(), p, userRequest("hi", offered), nil); err != nil {
			t.Fatal(err)
		}
		if _, ok := srv.Requests()[0].Fields["tool_choice"]; ok {
			t.Error("tool_choice names a tool that is not offered")
		}
	})

	for _, bad := range []Config{
		{Request: RequestOptions{ToolChoice: "any tool"}},
		{Request: RequestOptions{ReasoningEffort: "extreme"}},
		{Models: map[string]RequestOptions{"m": {ReasoningEffort: "lots"}}},
	} {
		bad.BaseURL, bad.APIKeyEnv = "http://127.0.0.1:1/v1", "AGENTKERNEL_TEST_UNSET_KEY"
		if _, err := New(bad); err == nil || !strings.Contains(err.Error(), "model") {
			t.Errorf("New(%+v) = %v, want an error naming the setting", bad, err)
		}
	}
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// TestReasoningEcho: reasoning that came with tool calls goes back on that
// assistant message, in the field it arrived in; older exchanges' reasoning
// and reasoning without calls do not.
func TestReasoningEcho(t *testing.T) {
	call := []kernel.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	req := kernel.Request{Model: "deepseek-reasoner", Tools: offered, Messages: []kernel.Message{
		{Role: kernel.RoleUser, Content: "old question"},
		{Role: kernel.RoleAssistant, Reasoning: "OLD-REASONING", ReasoningField: "reasoning_content", ToolCalls: []kernel.ToolCall{{ID: "c0", Name: "get_weather", Arguments: `{}`}}},
		{Role: kernel.RoleTool, ToolCallID: "c0", Content: "sunny"},
		{Role: kernel.RoleAssistant, Content: "It is sunny.", Reasoning: "NO-CALLS-REASONING", ReasoningField: "reasoning_content"},
		{Role: kernel.RoleUser, Content: "and Paris?"},
		{Role: kernel.RoleAssistant, Reasoning: "NEW-REASONING", ReasoningField: "reasoning_content", ToolCalls: call},
		{Role: kernel.RoleTool, ToolCallID: "c1", Content: "rain"},
		{Role: kernel.RoleAssistant, Reasoning: "OLLAMA-STYLE", ReasoningField: "reasoning", ToolCalls: []kernel.ToolCall{{ID: "c2", Name: "get_weather", Arguments: `{"city":"Lyon"}`}}},
		{Role: kernel.RoleTool, ToolCallID: "c2", Content: "fog"},
	}}
	srv := openaitest.NewServer(t, openaitest.Text("ok"))
	p := localProvider(t, srv.URL(), Config{})
	if _, err := stream(t, context.Background(), p, req, nil); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	body := string(r.Body)
	for _, gone := range []string{"OLD-REASONING", "NO-CALLS-REASONING"} {
		if strings.Contains(body, gone) {
			t.Errorf("%s was sent back", gone)
		}
	}
	msgs := r.Chat.Messages
	if msgs[5].ReasoningContent != "NEW-REASONING" || msgs[5].Reasoning != "" {
		t.Errorf("current exchange's tool-call message: reasoning_content %q reasoning %q", msgs[5].ReasoningContent, msgs[5].Reasoning)
	}
	if msgs[7].Reasoning != "OLLAMA-STYLE" || msgs[7].ReasoningContent != "" {
		t.Errorf("reasoning received as \"reasoning\" sent back as reasoning %q / reasoning_content %q", msgs[7].Reasoning, msgs[7].ReasoningContent)
	}
}

// TestInvalidArgumentsOnTheWire: arguments that are not a JSON object go
// back as an object quoting them; valid ones go back byte for byte.
func TestInvalidArgumentsOnTheWire(t *testing.T) {
	tests := []struct{ args, want string }{
		{`{"path": "a.txt"}`, `{"path": "a.txt"}`},
		{"", "{}"},
		{"  ", "{}"},
		{`{"path": "a.txt"`, `{"error":"these arguments were not a valid JSON object, so the call was not run","arguments_as_sent":"{\"path\": \"a.txt\""}`},
		{`{"a":1}{"b":2}`, `{"error":"these arguments were not a valid JSON object, so the call was not run","arguments_as_sent":"{\"a\":1}{\"b\":2}"}`},
		{`["x"]`, `{"error":"these arguments were not a valid JSON object, so the call was not run","arguments_as_sent":"[\"x\"]"}`},
	}
	for _, tt := range tests {
		got := argumentsForWire(tt.args)
		if got != tt.want {
			t.Errorf("argumentsForWire(%q) = %s, want %s", tt.args, got, tt.want)
		}
		var obj map[string]any
		if json.Unmarshal([]byte(got), &obj) != nil || obj == nil {
			t.Errorf("argumentsForWire(%q) = %s is not a JSON object", tt.args, got)
		}
	}
}

// TestIdleTimeoutVersusSlowStream: IdleTimeout ends a stream that stops
// sending, and lets a slow one that keeps sending finish however long it
// takes in all.
func TestIdleTimeoutVersusSlowStream(t *testing.T) {
	const idle = 2 * time.Second
	sse := string(readFile(t, "text.sse")) // 13 events
	t.Run("slow but live completes", func(t *testing.T) {
		// An event every 250ms (8x inside the idle limit): about 3.3s in
		// all, longer than the idle limit.
		srv := openaitest.NewServer(t, openaitest.Step{SSE: sse, Delay: 250 * time.Millisecond})
		p := localProvider(t, srv.URL(), Config{IdleTimeout: idle})
		start := time.Now()
		resp, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
		if err != nil {
			t.Fatalf("a live stream was cut: %v", err)
		}
		if resp.Message.Content != "Hello! How can I help you today?" {
			t.Errorf("content %q", resp.Message.Content)
		}
		if time.Since(start) < idle {
			t.Logf("the stream took %s, less than the idle limit: the server was faster than paced", time.Since(start))
		}
	})
	t.Run("stalled is cut", func(t *testing.T) {
		srv := openaitest.NewServer(t, openaitest.Step{SSE: sse, Stall: 3})
		p := localProvider(t, srv.URL(), Config{IdleTimeout: idle})
		_, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
		pe := providerError(t, err)
		if pe.Code != "stream_idle" || !pe.Retryable || !strings.Contains(pe.Message, "sent nothing for 2s") {
			t.Errorf("got %v (code %q): want a retryable stream_idle", err, pe.Code)
		}
	})
}
