package openaitest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// fakeT records the server's test failures instead of failing the test, so
// that the failures themselves can be checked.
type fakeT struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeT) failures() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.errs, "\n")
}

func provider(t *testing.T, srv *openaitest.Server) *openai.Provider {
	t.Helper()
	p, err := openai.New(openai.Config{BaseURL: srv.URL(), APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(tools ...string) kernel.Request {
	req := kernel.Request{Model: "test-model", Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "hi"}}}
	for _, name := range tools {
		req.Tools = append(req.Tools, kernel.ToolSpec{Name: name, Tier: kernel.TierReadOnly})
	}
	return req
}

// TestSteps streams every kind of step through the real provider.
func TestSteps(t *testing.T) {
	long := strings.Repeat("héllo wörld ☃ ", 9) // multi-byte runes across piece boundaries
	srv := openaitest.NewServer(t,
		openaitest.Text(long),
		openaitest.ToolCalls(
			openaitest.Call{Name: "fs.read", Arguments: `{"path":"a/very/long/path/to/some/file.go"}`},
			openaitest.Call{ID: "call_mine", Name: "plain", Arguments: `{}`},
		),
		openaitest.Step{Reasoning: "thinking…", Text: "done", FinishReason: "length",
			Usage: &kernel.Usage{InputTokens: 7, OutputTokens: 3, CachedInputTokens: 2, ReasoningTokens: 1}},
		openaitest.Error(429, "slow down"),
		openaitest.Step{Text: "partial", Cut: true},
	)
	p := provider(t, srv)
	ctx := context.Background()

	t.Run("text", func(t *testing.T) {
		var deltas int
		resp, err := p.Stream(ctx, request(), func(kernel.Delta) { deltas++ })
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Content != long || resp.FinishReason != "stop" || resp.Model != "test-model" {
			t.Errorf("got %+v", resp)
		}
		if deltas < 2 {
			t.Errorf("%d deltas: the text was not streamed in pieces", deltas)
		}
		if resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
			t.Errorf("no usage estimate: %+v", resp.Usage)
		}
	})
	t.Run("tool calls", func(t *testing.T) {
		resp, err := p.Stream(ctx, request("fs.read", "plain"), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []kernel.ToolCall{
			{ID: "call_2_0", Name: "fs.read", Arguments: `{"path":"a/very/long/path/to/some/file.go"}`},
			{ID: "call_mine", Name: "plain", Arguments: `{}`},
		}
		if len(resp.Message.ToolCalls) != 2 || resp.Message.ToolCalls[0] != want[0] || resp.Message.ToolCalls[1] != want[1] {
			t.Errorf("calls %+v, want %+v", resp.Message.ToolCalls, want)
		}
		if resp.FinishReason != "tool_calls" {
			t.Errorf("finish %q", resp.FinishReason)
		}
	})
	t.Run("reasoning and usage", func(t *testing.T) {
		resp, err := p.Stream(ctx, request(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Reasoning != "thinking…" || resp.Message.Content != "done" || resp.FinishReason != "length" {
			t.Errorf("got %+v", resp)
		}
		if resp.Usage != (kernel.Usage{InputTokens: 7, OutputTokens: 3, CachedInputTokens: 2, ReasoningTokens: 1}) {
			t.Errorf("usage %+v", resp.Usage)
		}
	})
	t.Run("error", func(t *testing.T) {
		_, err := p.Stream(ctx, request(), nil)
		var pe *kernel.ProviderError
		if !errors.As(err, &pe) || pe.StatusCode != 429 || pe.Code != "rate_limit_exceeded" || !pe.Retryable || pe.Message != "slow down" {
			t.Errorf("got %#v", err)
		}
	})
	t.Run("cut", func(t *testing.T) {
		_, err := p.Stream(ctx, request(), nil)
		if !errors.Is(err, openai.ErrStreamCut) {
			t.Errorf("got %v, want a cut stream", err)
		}
	})
	if n := len(srv.Requests()); n != 5 || srv.Remaining() != 0 {
		t.Errorf("%d requests recorded, %d steps left", n, srv.Remaining())
	}
}

// TestExhausted checks that a request past the end of the script fails the
// test with a message saying so, and gets a non-retryable error.
func TestExhausted(t *testing.T) {
	ft := &fakeT{TB: t}
	srv := openaitest.NewServer(ft, openaitest.Text("only one"))
	p := provider(t, srv)
	if _, err := p.Stream(context.Background(), request(), nil); err != nil {
		t.Fatal(err)
	}
	if got := ft.failures(); got != "" {
		t.Fatalf("failures after the scripted request: %s", got)
	}
	_, err := p.Stream(context.Background(), request(), nil)
	var pe *kernel.ProviderError
	if !errors.As(err, &pe) || pe.Retryable || !strings.Contains(pe.Message, "request 2 arrived but the script has only 1 step(s)") {
		t.Errorf("got %v", err)
	}
	if got := ft.failures(); !strings.Contains(got, "request 2 arrived but the script has only 1 step(s)") {
		t.Errorf("the test was not failed clearly: %q", got)
	}
	if len(srv.Requests()) != 2 {
		t.Errorf("the extra request was not recorded")
	}
}

// TestBadRequests checks that requests the server cannot serve fail the test.
func TestBadRequests(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		status                   int
		failure                  string
	}{
		{"wrong path", "POST", "/v1/completions", `{}`, 404, "unexpected request POST /v1/completions"},
		{"wrong method", "GET", "/v1/chat/completions", ``, 404, "unexpected request GET"},
		{"not JSON", "POST", "/v1/chat/completions", `{`, 400, "request body: not a JSON object"},
		{"not streaming", "POST", "/v1/chat/completions", `{"model":"m","messages":[]}`, 400, `did not ask for a stream`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := &fakeT{TB: t}
			srv := openaitest.NewServer(ft, openaitest.Text("x"))
			req, err := http.NewRequest(tt.method, strings.TrimSuffix(srv.URL(), "/v1")+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tt.status || !json.Valid(body) {
				t.Errorf("status %d body %s", res.StatusCode, body)
			}
			if got := ft.failures(); !strings.Contains(got, tt.failure) {
				t.Errorf("failures %q do not contain %q", got, tt.failure)
			}
		})
	}
}

// TestFile replays a recorded stream from a file.
func TestFile(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.File(t, "../testdata/reasoning_content.sse"))
	resp, err := provider(t, srv).Stream(context.Background(), request(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "9.8 is larger than 9.11." || resp.Model != "deepseek-reasoner" {
		t.Errorf("got %+v", resp)
	}
	if got := srv.Requests()[0].Chat.Messages[0]; got.Role != "user" || got.Content != "hi" {
		t.Errorf("recorded message %+v", got)
	}
}

func TestContent(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`null`, ""},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "ab"},
	}
	for _, tt := range tests {
		var c openaitest.Content
		if err := json.Unmarshal([]byte(tt.in), &c); err != nil || string(c) != tt.want {
			t.Errorf("%s: got %q, %v", tt.in, c, err)
		}
	}
	var c openaitest.Content
	if err := json.Unmarshal([]byte(`5`), &c); err == nil {
		t.Error("a number was accepted as content")
	}
}
