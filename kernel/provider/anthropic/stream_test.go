package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic/anthropictest"
)

const (
	fixtureSignature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDa6f4+/nRSLq1kjEiMKLn0X+Bz2bgYoKxV1xhK4F6j/Jm3Zf6gSx8mL0=="
	fixtureThinking  = "The user asks about the weather in Paris. I should call get_weather; units: celsius < fahrenheit & \"quotes\" \u2028 naïve."
)

// TestThinkingToolUseReplay replays a tool-use turn with extended thinking,
// then sends the tool result back: the second request carries the thinking
// block first, with its text and signature exactly as they streamed in,
// then the text and the tool_use, and the result in a tool_result block.
// The whole second request is compared byte for byte with a golden file.
func TestThinkingToolUseReplay(t *testing.T) {
	srv := anthropictest.NewServer(t,
		anthropictest.File(t, "testdata/thinking_tool_use.sse"),
		anthropictest.File(t, "testdata/text_after_tool.sse"))
	p := localProvider(t, srv.URL(), Config{Request: RequestOptions{MaxTokens: 16000, Thinking: Thinking{Type: "enabled", BudgetTokens: 8000}}})
	first := kernel.Request{Model: "claude-sonnet-4-5", Tools: []kernel.ToolSpec{weather}, Messages: []kernel.Message{
		{Role: kernel.RoleSystem, Content: "You are a weather assistant."},
		{Role: kernel.RoleUser, Content: "What's the weather in Paris?"},
	}}
	var c collector
	resp, err := stream(t, p, first, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Message
	if m.Reasoning != fixtureThinking || c.text(kernel.DeltaReasoning) != fixtureThinking {
		t.Errorf("reasoning %q (deltas %q), want %q", m.Reasoning, c.text(kernel.DeltaReasoning), fixtureThinking)
	}
	if m.Content != "Let me check the weather in Paris." || c.text(kernel.DeltaText) != m.Content {
		t.Errorf("content %q, deltas %q", m.Content, c.text(kernel.DeltaText))
	}
	if len(m.ToolCalls) != 1 || m.ToolCalls[0] != (kernel.ToolCall{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius"}`}) {
		t.Errorf("tool calls %+v", m.ToolCalls)
	}
	if len(m.ReasoningBlocks) != 1 || m.ReasoningBlocks[0].Provider != Name || m.ReasoningBlocks[0].Index != 0 {
		t.Fatalf("reasoning blocks %+v", m.ReasoningBlocks)
	}
	if resp.FinishReason != "tool_use" || resp.Model != "claude-sonnet-4-5-20250929" {
		t.Errorf("finish %q model %q", resp.FinishReason, resp.Model)
	}
	if want := (kernel.Usage{InputTokens: 412, OutputTokens: 96, ReasoningTokens: 41}); resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}

	m.Role = kernel.RoleAssistant
	second := first
	second.Messages = append(append([]kernel.Message(nil), first.Messages...), m,
		kernel.Message{Role: kernel.RoleTool, ToolCallID: m.ToolCalls[0].ID, ToolName: "get_weather", Content: `{"temp_c": 18, "sky": "sunny"}`})
	if _, err := stream(t, p, second, nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	body := reqs[1].Body
	checkGolden(t, "thinking_second_request.golden.json", body)

	msgs := reqs[1].Messages.Messages
	if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[2].Role != "user" {
		t.Fatalf("second request messages: %+v", msgs)
	}
	a := msgs[1].Content
	if len(a) != 3 || a[0].Type != "thinking" || a[1].Type != "text" || a[2].Type != "tool_use" {
		t.Fatalf("assistant blocks %+v", a)
	}
	if a[0].Signature != fixtureSignature || a[0].Thinking != fixtureThinking {
		t.Errorf("thinking block changed on the way back:\n got %q %q\nwant %q %q", a[0].Signature, a[0].Thinking, fixtureSignature, fixtureThinking)
	}
	if !bytes.Contains(body, []byte(`"signature":"`+fixtureSignature+`"`)) {
		t.Errorf("the signature's bytes are not in the request")
	}
	if r := msgs[2].Content[0]; r.Type != "tool_result" || r.ToolUseID != "toolu_01A09q90qw90lq917835lq9" || r.IsError {
		t.Errorf("tool result %+v", r)
	}
	if string(a[2].Input) != `{"city":"Paris","unit":"celsius"}` {
		t.Errorf("tool_use input %s", a[2].Input)
	}
}

// TestParallelToolRound: two tool_use blocks in one answer become two
// calls in order; their results go back in one user message, the failed
// one marked is_error.
func TestParallelToolRound(t *testing.T) {
	srv := anthropictest.NewServer(t, anthropictest.File(t, "testdata/parallel_tool_use.sse"), anthropictest.Text("Both read."))
	p := localProvider(t, srv.URL(), Config{})
	req := kernel.Request{Model: "claude-sonnet-4-5", Tools: fsTools, Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "Read the README and list docs."}}}
	resp, err := stream(t, p, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 || calls[0].Name != "fs.read_file" || calls[1].Name != "fs.list_dir" || calls[1].Arguments != `{"dir": "docs"}` {
		t.Fatalf("calls %+v", calls)
	}
	resp.Message.Role = kernel.RoleAssistant
	req.Messages = append(req.Messages, resp.Message,
		kernel.Message{Role: kernel.RoleTool, ToolCallID: calls[0].ID, ToolName: calls[0].Name, Content: "# Hello"},
		kernel.Message{Role: kernel.RoleTool, ToolCallID: calls[1].ID, ToolName: calls[1].Name, Content: "error: no such directory", IsError: true})
	if _, err := stream(t, p, req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Requests()[1].Messages.Messages
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3 (user, assistant, one user message with both results)", len(msgs))
	}
	res := msgs[2].Content
	if len(res) != 2 || res[0].ToolUseID != "toolu_01Read" || res[1].ToolUseID != "toolu_01List" || res[0].IsError || !res[1].IsError {
		t.Errorf("results %+v", res)
	}
	if got := srv.Requests()[1].Messages.Tools; got[0].Name != "fs__read_file" || got[1].Name != "fs__list_dir" {
		t.Errorf("wire tool names %q %q", got[0].Name, got[1].Name)
	}
}

// TestRedactedThinking: a redacted_thinking block is kept opaque and goes
// back first, before the thinking block that followed it.
func TestRedactedThinking(t *testing.T) {
	srv := anthropictest.NewServer(t, anthropictest.File(t, "testdata/redacted_thinking.sse"), anthropictest.Text("Listed."))
	p := localProvider(t, srv.URL(), Config{Request: RequestOptions{MaxTokens: 4096, Thinking: Thinking{Type: "enabled", BudgetTokens: 2048}}})
	req := kernel.Request{Model: "claude-opus-4-5", Tools: fsTools, Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "What is here?"}}}
	resp, err := stream(t, p, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Message.ReasoningBlocks); n != 2 {
		t.Fatalf("%d reasoning blocks, want 2", n)
	}
	if resp.Message.Reasoning != "Listing the directory answers it." {
		t.Errorf("reasoning %q: a redacted block has no text to show", resp.Message.Reasoning)
	}
	resp.Message.Role = kernel.RoleAssistant
	req.Messages = append(req.Messages, resp.Message, kernel.Message{Role: kernel.RoleTool, ToolCallID: "toolu_01Redact", Content: "a.txt"})
	if _, err := stream(t, p, req, nil); err != nil {
		t.Fatal(err)
	}
	a := srv.Requests()[1].Messages.Messages[1].Content
	if len(a) != 3 || a[0].Type != "redacted_thinking" || a[1].Type != "thinking" || a[2].Type != "tool_use" {
		t.Fatalf("assistant blocks %+v", a)
	}
	const data = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pLmN5kjc6svv9oyMjtGMA+DZfMLd4ZsM0kQIHhTUvkK7LuWSvHNZQ=="
	if a[0].Data != data || a[1].Signature != "ErUBCkYIBxgCIkB0redactedpairsig" {
		t.Errorf("blocks changed: %q %q", a[0].Data, a[1].Signature)
	}
}

// TestCacheUsage: cache reads and writes are part of the input and
// counted apart, and the catalog's rates price them.
func TestCacheUsage(t *testing.T) {
	srv := anthropictest.NewServer(t, anthropictest.File(t, "testdata/cache_usage.sse"))
	p := localProvider(t, srv.URL(), Config{})
	resp, err := stream(t, p, kernel.Request{Model: "claude-sonnet-4-5", Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "go on"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := kernel.Usage{InputTokens: 48 + 2052 + 14210, CachedInputTokens: 14210, CacheWriteTokens: 2052, OutputTokens: 310}
	if resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
	// Sonnet's list prices: $3 input, $3.75 cache write, $0.30 cache read, $15 output.
	price := kernel.Price{InputPerMTok: 3, CacheWriteInputPerMTok: 3.75, CachedInputPerMTok: 0.30, OutputPerMTok: 15}
	got := price.Cost(resp.Usage)
	wantCost := (48*3 + 2052*3.75 + 14210*0.30 + 310*15) / 1e6
	if d := got - wantCost; d > 1e-12 || d < -1e-12 {
		t.Errorf("cost %.8f, want %.8f", got, wantCost)
	}
	uncached := kernel.Price{InputPerMTok: 3, OutputPerMTok: 15}.Cost(resp.Usage)
	if got >= uncached {
		t.Errorf("cached cost %.6f is not below the uncached %.6f", got, uncached)
	}
}

// TestRefusal: stop_reason refusal (the SDK's own recorded stream) is an
// error no retry or fallback repeats, after the partial text streamed.
func TestRefusal(t *testing.T) {
	srv := anthropictest.NewServer(t, anthropictest.File(t, "testdata/sdk_refusal.sse"))
	p := localProvider(t, srv.URL(), Config{})
	var c collector
	_, err := stream(t, p, kernel.Request{Model: "primary-model", Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "hi"}}}, c.emit)
	pe := providerError(t, err)
	if pe.Code != "refusal" || pe.Retryable || !errors.Is(err, ErrRefusal) {
		t.Errorf("error %+v", pe)
	}
	if c.text(kernel.DeltaText) != "Hi" {
		t.Errorf("streamed %q before the refusal", c.text(kernel.DeltaText))
	}
}

// TestStreamFailures covers the ways a stream ends badly.
func TestStreamFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		step      anthropictest.Step
		code      string
		status    int
		retryable bool
		after     time.Duration
		msg       string
	}{
		{"overloaded mid-stream", anthropictest.File(t, "testdata/overloaded_midstream.sse"), "overloaded_error", 0, true, 0, "Overloaded"},
		{"cut inside a tool_use block", anthropictest.File(t, "testdata/cut_in_tool_use.sse"), "stream_cut", 0, true, 0, "inside a tool_use block"},
		{"529 overloaded", anthropictest.Error(529, "Overloaded"), "overloaded_error", 529, true, 0, "Overloaded"},
		{"429 with retry-after", func() anthropictest.Step {
			s := anthropictest.Error(429, "Number of request tokens has exceeded your per-minute rate limit")
			s.Header = http.Header{"Retry-After": {"7"}}
			return s
		}(), "rate_limit_error", 429, true, 7 * time.Second, "rate limit"},
		{"500", anthropictest.Error(500, "Internal server error"), "api_error", 500, true, 0, "Internal"},
		{"401", anthropictest.Error(401, "invalid x-api-key"), "authentication_error", 401, false, 0, "x-api-key"},
		{"402 billing", anthropictest.Error(402, "Your credit balance is too low"), "billing_error", 402, false, 0, "credit"},
		{"400 prompt too long", anthropictest.Error(400, "prompt is too long: 210311 tokens > 200000 maximum"), "context_length_exceeded", 400, false, 0, "too long"},
		{"404 model", anthropictest.Error(404, "model: claude-nope"), "not_found_error", 404, false, 0, "claude-nope"},
		{"proxy page", anthropictest.Step{Status: 502, Body: "<html><body>Bad Gateway</body></html>"}, "", 502, true, 0, "Bad Gateway"},
		{"garbage event", anthropictest.Step{SSE: "event: message_start\ndata: {not json\n\n"}, "malformed_chunk", 0, false, 0, "line 2"},
		{"delta before start", anthropictest.Step{SSE: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"}, "malformed_chunk", 0, false, 0, "never started"},
		{"server tool block", anthropictest.Step{SSE: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n"}, "unsupported_block", 0, false, 0, "server_tool_use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := anthropictest.NewServer(t, tc.step)
			p := localProvider(t, srv.URL(), Config{})
			_, err := stream(t, p, kernel.Request{Model: "claude-sonnet-4-5", Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "hi"}}}, nil)
			pe := providerError(t, err)
			if pe.Code != tc.code || pe.StatusCode != tc.status || pe.Retryable != tc.retryable || pe.RetryAfter != tc.after {
				t.Errorf("got code %q status %d retryable %v after %s; want %q %d %v %s", pe.Code, pe.StatusCode, pe.Retryable, pe.RetryAfter, tc.code, tc.status, tc.retryable, tc.after)
			}
			if !strings.Contains(pe.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", pe.Error(), tc.msg)
			}
		})
	}
}

// TestPauseTurn: a pause_turn stop is continued at once with the answer
// so far as the last assistant message, and the pieces are one message.
func TestPauseTurn(t *testing.T) {
	srv := anthropictest.NewServer(t, anthropictest.File(t, "testdata/pause_turn.sse"), anthropictest.Text(" and done."))
	p := localProvider(t, srv.URL(), Config{})
	resp, err := stream(t, p, kernel.Request{Model: "claude-sonnet-4-5", Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "long task"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Working on it and done." || resp.FinishReason != "end_turn" || len(resp.Message.ReasoningBlocks) != 1 {
		t.Errorf("response %+v", resp)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	last := reqs[1].Messages.Messages[len(reqs[1].Messages.Messages)-1]
	if last.Role != "assistant" || len(last.Content) != 2 || last.Content[0].Signature != "sig-pause-1" || last.Content[1].Text != "Working on it" {
		t.Errorf("continuation's last message %+v", last)
	}
	if resp.Usage.InputTokens < 200 || resp.Usage.OutputTokens < 30 {
		t.Errorf("usage %+v is not the sum of both requests", resp.Usage)
	}
}

// TestMaxTokens: an answer cut by max_tokens is returned as it is, with
// its stop reason.
func TestMaxTokens(t *testing.T) {
	srv := anthropictest.NewServer(t, anthropictest.File(t, "testdata/max_tokens.sse"))
	p := localProvider(t, srv.URL(), Config{})
	resp, err := stream(t, p, kernel.Request{Model: "claude-haiku-4-5", Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "list"}}}, nil)
	if err != nil || resp.FinishReason != "max_tokens" || !strings.HasSuffix(resp.Message.Content, "two, and") {
		t.Fatalf("%+v %v", resp, err)
	}
}

// TestBreakpoints: cache_control goes on the last tool, the system prompt,
// the compaction summary and the latest user messages, never more than
// four; cache off sends none.
func TestBreakpoints(t *testing.T) {
	long := kernel.Message{Role: kernel.RoleSystem, Content: "You are careful." + "\n\n" + kernel.SummaryPrefix + "Earlier: read a.go."}
	hist := []kernel.Message{long, {Role: kernel.RoleUser, Content: "one"}, {Role: kernel.RoleAssistant, Content: "ok",
		ToolCalls: []kernel.ToolCall{{ID: "toolu_1", Name: "fs.read_file", Arguments: `{"path":"a"}`}}},
		{Role: kernel.RoleTool, ToolCallID: "toolu_1", Content: "A"}, {Role: kernel.RoleAssistant, Content: "read"},
		{Role: kernel.RoleUser, Content: "two"}}
	for _, tc := range []struct {
		name  string
		msgs  []kernel.Message
		tools []kernel.ToolSpec
		opts  RequestOptions
		want  int
		check func(t *testing.T, r *anthropictest.Request)
	}{
		{"tools, prompt, summary, last user", hist, fsTools, RequestOptions{}, 4, func(t *testing.T, r *anthropictest.Request) {
			s := r.Messages.System
			if len(s) != 2 || s[0].Text != "You are careful." || !strings.HasPrefix(s[1].Text, kernel.SummaryPrefix) || s[0].CacheControl == nil || s[1].CacheControl == nil {
				t.Errorf("system %+v", s)
			}
			if r.Messages.Tools[1].CacheControl == nil || r.Messages.Tools[0].CacheControl != nil {
				t.Error("the breakpoint is not on the last tool alone")
			}
			m := r.Messages.Messages
			if m[len(m)-1].Content[0].CacheControl == nil {
				t.Error("no breakpoint on the last user message")
			}
		}},
		{"no summary: three user messages", hist[1:], fsTools, RequestOptions{CacheTTL: "1h"}, 4, func(t *testing.T, r *anthropictest.Request) {
			m := r.Messages.Messages
			if c := m[2].Content[0].CacheControl; c == nil || c.TTL != "1h" {
				t.Errorf("tool result breakpoint %+v", c)
			}
		}},
		{"four at most", append(append([]kernel.Message(nil), hist...), kernel.Message{Role: kernel.RoleAssistant, Content: "more"},
			kernel.Message{Role: kernel.RoleUser, Content: "three"}), fsTools, RequestOptions{}, 4, func(t *testing.T, r *anthropictest.Request) {
			m := r.Messages.Messages
			if m[len(m)-1].Content[0].CacheControl == nil || m[len(m)-3].Content[0].CacheControl != nil {
				t.Error("the one breakpoint left is not on the newest user message")
			}
		}},
		{"cache off", hist, fsTools, RequestOptions{Cache: "off"}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := anthropictest.NewServer(t, anthropictest.Text("ok"))
			p := localProvider(t, srv.URL(), Config{Request: tc.opts})
			if _, err := stream(t, p, kernel.Request{Model: "claude-sonnet-4-5", Messages: tc.msgs, Tools: tc.tools}, nil); err != nil {
				t.Fatal(err)
			}
			r := srv.Requests()[0]
			if n := r.Breakpoints(); n != tc.want {
				t.Errorf("%d breakpoints, want %d:\n%s", n, tc.want, r.Body)
			}
			if tc.check != nil {
				tc.check(t, &r)
			}
		})
	}
}

// TestRequestShaping: thinking, effort, tool choice and parallel calls go
// out as configured, per model.
func TestRequestShaping(t *testing.T) {
	no := false
	srv := anthropictest.NewServer(t, anthropictest.Text("a"), anthropictest.Text("b"))
	p := localProvider(t, srv.URL(), Config{
		Request: RequestOptions{MaxTokens: 20000, Thinking: Thinking{Type: "enabled", BudgetTokens: 10000, Display: "omitted"}, ToolChoice: "required", ParallelToolCalls: &no},
		Models:  map[string]RequestOptions{"claude-opus-4-5": {Thinking: Thinking{Type: "adaptive"}, Effort: "high", ToolChoice: "fs.list_dir"}},
	})
	for _, model := range []string{"claude-sonnet-4-5", "claude-opus-4-5"} {
		if _, err := stream(t, p, kernel.Request{Model: model, Tools: fsTools, Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "x"}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r := srv.Requests()
	for i, want := range []map[string]string{
		{"thinking": `{"budget_tokens":10000,"display":"omitted","type":"enabled"}`, "tool_choice": `{"disable_parallel_tool_use":true,"type":"any"}`, "max_tokens": "20000"},
		{"thinking": `{"type":"adaptive"}`, "tool_choice": `{"name":"fs__list_dir","disable_parallel_tool_use":true,"type":"tool"}`, "output_config": `{"effort":"high"}`},
	} {
		for k, v := range want {
			if got := string(r[i].Fields[k]); got != v {
				t.Errorf("request %d %s = %s, want %s", i+1, k, got, v)
			}
		}
	}
}

// TestNewErrors: configuration mistakes are refused with the field named.
func TestNewErrors(t *testing.T) {
	t.Setenv("AGENTKERNEL_TEST_EMPTY_KEY", "")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"remote without key", Config{APIKeyEnv: "AGENTKERNEL_TEST_EMPTY_KEY"}, "AGENTKERNEL_TEST_EMPTY_KEY is not set"},
		{"v1 in base_url", Config{BaseURL: "http://127.0.0.1:9/v1"}, "leave out the /v1"},
		{"budget over max_tokens", Config{BaseURL: "http://127.0.0.1:9", Request: RequestOptions{MaxTokens: 4000, Thinking: Thinking{Type: "enabled", BudgetTokens: 4000}}}, "model.thinking.budget_tokens 4000 must be less than max_tokens 4000"},
		{"small budget", Config{BaseURL: "http://127.0.0.1:9", Request: RequestOptions{Thinking: Thinking{Type: "enabled", BudgetTokens: 100}}}, "at least 1024"},
		{"budget without enabled", Config{BaseURL: "http://127.0.0.1:9", Models: map[string]RequestOptions{"m": {Thinking: Thinking{Type: "adaptive", BudgetTokens: 2000}}}}, "model.overrides.m.thinking.budget_tokens"},
		{"bad type", Config{BaseURL: "http://127.0.0.1:9", Request: RequestOptions{Thinking: Thinking{Type: "on"}}}, `model.thinking.type "on"`},
		{"bad effort", Config{BaseURL: "http://127.0.0.1:9", Request: RequestOptions{Effort: "minimal"}}, `model.reasoning_effort "minimal"`},
		{"bad cache", Config{BaseURL: "http://127.0.0.1:9", Request: RequestOptions{Cache: "always"}}, `model.cache "always"`},
		{"key in env name", Config{BaseURL: "http://127.0.0.1:9", APIKeyEnv: "sk-ant-123"}, "not an environment variable name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestKeyHeaderAndRedaction: the key goes as the bearer token (API
// version 2026-10-21, as the SDK sends it) and nowhere else, the SDK's
// own environment is not read, and a key echoed in an error is redacted.
func TestKeyHeaderAndRedaction(t *testing.T) {
	const key = "sk-ant-api03-test-key-0123456789"
	t.Setenv("AGENTKERNEL_TEST_ANTHROPIC_KEY", key)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-wrong-key-from-sdk-env")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: yes")
	srv := anthropictest.NewServer(t, anthropictest.Step{Status: 401, Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + key + `"}}`},
		anthropictest.Text("ok"))
	p, err := New(Config{BaseURL: srv.URL(), APIKeyEnv: "AGENTKERNEL_TEST_ANTHROPIC_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	req := kernel.Request{Model: "claude-sonnet-4-5", Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "hi"}}}
	_, err = stream(t, p, req, nil)
	if err == nil || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Errorf("error %v", err)
	}
	if _, err := stream(t, p, req, nil); err != nil {
		t.Fatal(err)
	}
	h := srv.Requests()[1].Header
	if h.Get("Authorization") != "Bearer "+key || h.Get("X-Api-Key") != "" || h.Get("X-Leak") != "" || h.Get("Traceparent") != "" {
		t.Errorf("headers %v", h)
	}
	if h.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
	var body map[string]json.RawMessage
	_ = json.Unmarshal(srv.Requests()[1].Body, &body)
	if string(body["stream"]) != "true" {
		t.Errorf("stream = %s", body["stream"])
	}
}
