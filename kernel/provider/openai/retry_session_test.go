package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// session is the real kernel loop on the openai provider against an
// openaitest server, with retry sleeps recorded instead of slept.
type session struct {
	srv    *openaitest.Server
	k      *kernel.Kernel
	store  kernel.Store
	mu     sync.Mutex
	sleeps []time.Duration
	events []kernel.Event
	ran    []string // "tool:args" of every call run
}

func newSession(t *testing.T, model string, steps ...openaitest.Step) *session {
	t.Helper()
	return newSessionWith(t, model, nil, steps...)
}

// newSessionWith is newSession with the kernel's Config adjusted by tune.
func newSessionWith(t *testing.T, model string, tune func(*kernel.Config), steps ...openaitest.Step) *session {
	t.Helper()
	s := &session{srv: openaitest.NewServer(t, steps...), store: memory.New()}
	p, err := openai.New(openai.Config{BaseURL: s.srv.URL(), APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	tools := kernel.NewRegistry()
	for _, name := range []string{"fs.list_dir", "fs.read_file", "get_weather"} {
		err := tools.Register(kernel.NewTool(kernel.ToolSpec{Name: name, Description: name, Tier: kernel.TierReadOnly, Source: "test",
			Schema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, args json.RawMessage) (kernel.Result, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.ran = append(s.ran, name+":"+string(args))
				return kernel.Result{Content: "result of " + name}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := kernel.Config{
		Provider: p, Store: s.store, Tools: tools, Model: model, ModelTimeout: 20 * time.Second,
		Retry: kernel.RetryPolicy{Sleep: func(ctx context.Context, d time.Duration) error {
			s.mu.Lock()
			s.sleeps = append(s.sleeps, d)
			s.mu.Unlock()
			return ctx.Err()
		}},
		OnEvent: func(e kernel.Event) { s.events = append(s.events, e) },
	}
	if tune != nil {
		tune(&cfg)
	}
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.k = k
	return s
}

func (s *session) run(t *testing.T, prompt string) *kernel.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.k.Run(ctx, "", prompt)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func (s *session) stored(t *testing.T, id string) []kernel.Message {
	t.Helper()
	sess, err := s.store.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sess.Messages
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSessionRateLimitThenSuccess(t *testing.T) {
	s := newSession(t, "gpt-4o-mini",
		openaitest.Step{Status: 429, Body: fixture(t, "error_429.json"), Header: http.Header{"Retry-After": {"2"}}},
		openaitest.Text("Done after the wait."))
	res := s.run(t, "hi")
	if res.Output != "Done after the wait." || res.StopReason != kernel.StopCompleted {
		t.Fatalf("result %+v", res)
	}
	// The first backoff is at most 1s; the server's Retry-After (2s) wins.
	if len(s.sleeps) != 1 || s.sleeps[0] < 2*time.Second {
		t.Errorf("slept %v, want one wait of at least the 2s Retry-After", s.sleeps)
	}
	var retry *kernel.ProviderRetry
	for _, e := range s.events {
		if r, ok := e.(kernel.ProviderRetry); ok {
			retry = &r
		}
	}
	if retry == nil || retry.Cause != "429" || retry.Attempt != 2 || !strings.Contains(retry.Error, "Rate limit reached") {
		t.Errorf("provider.retry %+v", retry)
	}
	if n := len(s.srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestSessionCutStreamRetried(t *testing.T) {
	s := newSession(t, "gpt-4o-mini",
		openaitest.Step{Text: "This answer will be cut off half", Cut: true},
		openaitest.Text("This answer arrives whole."))
	res := s.run(t, "hi")
	if res.Output != "This answer arrives whole." {
		t.Fatalf("output %q", res.Output)
	}
	var assistants []kernel.Message
	for _, m := range s.stored(t, res.SessionID) {
		if m.Role == kernel.RoleAssistant {
			assistants = append(assistants, m)
		}
	}
	if len(assistants) != 1 || assistants[0].Content != "This answer arrives whole." {
		t.Fatalf("stored assistant messages %+v, want exactly the retried answer", assistants)
	}
	var superseded int
	for _, e := range s.events {
		if r, ok := e.(kernel.ProviderRetry); ok && r.Cause == "stream_cut" {
			superseded = r.Superseded
		}
	}
	if superseded != len("This answer will be cut off half") {
		t.Errorf("superseded %d bytes, want the cut attempt's %d", superseded, len("This answer will be cut off half"))
	}
}

func TestSessionOllamaIndexZeroParallelCalls(t *testing.T) {
	s := newSession(t, "qwen3-coder:30b",
		openaitest.Raw(fixture(t, "ollama_0.20_parallel_index0.sse")),
		openaitest.Text("Listed and read."))
	res := s.run(t, "list and read")
	if res.Output != "Listed and read." {
		t.Fatalf("output %q", res.Output)
	}
	want := []string{`fs.list_dir:{"dir":"."}`, `fs.read_file:{"path":"notes.txt"}`}
	s.mu.Lock()
	ran := append([]string(nil), s.ran...)
	s.mu.Unlock()
	if len(ran) != 2 || !(ran[0] == want[0] && ran[1] == want[1] || ran[0] == want[1] && ran[1] == want[0]) {
		t.Errorf("calls run %q, want %q", ran, want)
	}
	second := s.srv.Requests()[1].Chat.Messages
	var ids []string
	for _, m := range second {
		if m.Role == "tool" {
			ids = append(ids, m.ToolCallID)
		}
	}
	if strings.Join(ids, ",") != "call_k3v9x2ab,call_p8d1m7qz" {
		t.Errorf("tool results answer %v", ids)
	}
	// Each id answers the right call.
	names := map[string]string{}
	for _, m := range s.stored(t, res.SessionID) {
		if m.Role == kernel.RoleTool {
			names[m.ToolCallID] = m.ToolName
		}
	}
	if names["call_k3v9x2ab"] != "fs.list_dir" || names["call_p8d1m7qz"] != "fs.read_file" {
		t.Errorf("results by id %v", names)
	}
}

// TestSessionDeepSeekReasoningEcho: DeepSeek's thinking mode answers 400
// (testdata/deepseek_v3.2_missing_reasoning.json) unless the tool-calling
// turn's reasoning_content comes back on the second request.
func TestSessionDeepSeekReasoningEcho(t *testing.T) {
	s := newSession(t, "deepseek-reasoner",
		openaitest.Raw(fixture(t, "deepseek_v3.2_thinking_tool_call.sse")),
		openaitest.Text("It rains in Paris."))
	res := s.run(t, "weather in Paris?")
	if res.Output != "It rains in Paris." {
		t.Fatalf("output %q", res.Output)
	}
	second := s.srv.Requests()[1].Chat.Messages
	var echoed string
	for _, m := range second {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			echoed = m.ReasoningContent
		}
	}
	if echoed != "The user wants the weather in Paris. I should call get_weather." {
		t.Errorf("second request's tool-call message carries reasoning_content %q", echoed)
	}
}

// TestSessionStrictHistoryAfterInvalidArguments: the model sends broken
// arguments; the kernel reports them to the model, keeps them in the
// session as sent, and the follow-up request passes a server that parses
// every argument string in the history (Ollama).
func TestSessionStrictHistoryAfterInvalidArguments(t *testing.T) {
	broken := `{"path": "notes.txt"`
	s := newSession(t, "llama3.1:8b",
		openaitest.Step{Calls: []openaitest.Call{{ID: "call_bad", Name: "fs.read_file", Arguments: broken}}},
		openaitest.Text("Sorry, fixed."))
	s.srv.StrictHistory()
	res := s.run(t, "read notes")
	if res.Output != "Sorry, fixed." {
		t.Fatalf("output %q: the strict server refused the history", res.Output)
	}
	var stored string
	for _, m := range s.stored(t, res.SessionID) {
		for _, c := range m.ToolCalls {
			stored = c.Arguments
		}
	}
	if stored != broken {
		t.Errorf("stored arguments %q, want them as the model sent them", stored)
	}
	sent := s.srv.Requests()[1].Chat.Messages[1].ToolCalls[0].Function.Arguments
	if !strings.Contains(sent, "not a valid JSON object") || !strings.Contains(sent, `\"path\": \"notes.txt\"`) {
		t.Errorf("sent back %s", sent)
	}
}

func TestSessionEmptyGeneration(t *testing.T) {
	empty := fixture(t, "ollama_0.12_empty.sse")
	s := newSession(t, "gemma3:4b", openaitest.Raw(empty), openaitest.Raw(empty))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.k.Run(ctx, "", "hi")
	if !errors.Is(err, kernel.ErrEmptyResponse) || res.StopReason != kernel.StopEmptyResponse {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if n := len(s.srv.Requests()); n != 2 {
		t.Errorf("%d requests, want the empty answer asked again once", n)
	}
}
