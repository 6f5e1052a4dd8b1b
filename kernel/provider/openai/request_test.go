package openai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// TestStreamRequest checks the request the server receives, against golden
// files and field by field.
func TestStreamRequest(t *testing.T) {
	history := kernel.Request{
		Model: "gpt-4.1",
		Messages: []kernel.Message{
			{Seq: 1, Role: kernel.RoleSystem, Content: "You are a coding agent."},
			{Seq: 2, Role: kernel.RoleUser, Content: "What does main.go do?"},
			{Seq: 3, Role: kernel.RoleAssistant, Content: "Let me look.", Reasoning: "SECRET-REASONING: never send me back",
				ToolCalls: []kernel.ToolCall{
					{ID: "call_1", Name: "fs.read_file", Arguments: `{"path":"main.go"}`},
					{ID: "call_2", Name: "clock", Arguments: ""},
				}},
			{Seq: 4, Role: kernel.RoleTool, ToolCallID: "call_1", ToolName: "fs.read_file", Content: "package main\n"},
			{Seq: 5, Role: kernel.RoleTool, ToolCallID: "call_2", ToolName: "clock", Content: "12:00", IsError: false},
			{Seq: 6, Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "call_3", Name: "old.tool", Arguments: "{}"}}},
			{Seq: 7, Role: kernel.RoleTool, ToolCallID: "call_3", ToolName: "old.tool", Content: "error: unknown tool", IsError: true},
			{Seq: 8, Role: kernel.RoleUser, Content: "Thanks. Search the web too."},
		},
		Tools: []kernel.ToolSpec{
			offered[1], offered[3],
			{Name: "clock", Description: "", Tier: kernel.TierReadOnly}, // no schema, no description
		},
	}

	tests := []struct {
		name  string
		req   kernel.Request
		check func(t *testing.T, r openaitest.Request)
	}{
		{"no_tools", userRequest("Say hello.", nil), func(t *testing.T, r openaitest.Request) {
			for _, key := range []string{"tools", "parallel_tool_calls", "tool_choice"} {
				if _, ok := r.Fields[key]; ok {
					t.Errorf("%q sent although no tool is offered", key)
				}
			}
		}},
		{"tools_and_history", history, func(t *testing.T, r openaitest.Request) {
			names := r.ToolNames()
			if strings.Join(names, ",") != "fs__read_file,web__search,clock" {
				t.Errorf("tool names on the wire %v", names)
			}
			for _, n := range names {
				if !toolname.Valid(n) {
					t.Errorf("%q is not a valid OpenAI function name", n)
				}
			}
			if _, ok := r.Fields["parallel_tool_calls"]; ok {
				t.Error("parallel_tool_calls sent although model.parallel_tool_calls is unset")
			}
			msgs := r.Chat.Messages
			if len(msgs) != 8 {
				t.Fatalf("%d messages, want 8", len(msgs))
			}
			calls := msgs[2].ToolCalls
			if len(calls) != 2 || calls[0].Function.Name != "fs__read_file" || calls[0].ID != "call_1" || calls[0].Type != "function" {
				t.Errorf("assistant tool calls %+v", calls)
			}
			if calls[1].Function.Arguments != "{}" {
				t.Errorf("empty arguments sent as %q, want {}", calls[1].Function.Arguments)
			}
			if msgs[5].ToolCalls[0].Function.Name != "old__tool" {
				t.Errorf("a tool no longer offered is sent as %q, want old__tool", msgs[5].ToolCalls[0].Function.Name)
			}
			for _, i := range []int{3, 4, 6} {
				if msgs[i].Role != "tool" || msgs[i].ToolCallID == "" {
					t.Errorf("message %d: role %q tool_call_id %q", i, msgs[i].Role, msgs[i].ToolCallID)
				}
			}
			if msgs[3].ToolCallID != "call_1" || msgs[3].Content != "package main\n" {
				t.Errorf("tool message %+v", msgs[3])
			}
			if strings.Contains(string(r.Body), "SECRET-REASONING") {
				t.Error("reasoning was sent back to the model")
			}
			// The schema goes out exactly as written: a big integer stays a
			// JSON number with all its digits.
			dec := json.NewDecoder(strings.NewReader(string(r.Chat.Tools[1].Function.Parameters)))
			dec.UseNumber()
			var schema struct {
				Properties struct {
					Limit struct {
						Maximum any `json:"maximum"`
					} `json:"limit"`
				} `json:"properties"`
			}
			if err := dec.Decode(&schema); err != nil {
				t.Fatal(err)
			}
			if max, ok := schema.Properties.Limit.Maximum.(json.Number); !ok || max.String() != "9007199254740993" {
				t.Errorf("schema maximum sent as %#v, want the JSON number 9007199254740993", schema.Properties.Limit.Maximum)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Text("ok"))
			p := localProvider(t, srv.URL(), Config{})
			if _, err := stream(t, context.Background(), p, tt.req, nil); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			r := reqs[0]
			if r.Path != "/v1/chat/completions" || r.Chat.Model != tt.req.Model || !r.Chat.Stream {
				t.Errorf("path %q model %q stream %v", r.Path, r.Chat.Model, r.Chat.Stream)
			}
			if o := r.Chat.StreamOptions; o == nil || !o.IncludeUsage {
				t.Error("stream_options.include_usage is not true")
			}
			if h := r.Header.Get("Authorization"); h != "" {
				t.Errorf("Authorization %q sent to a loopback server without a key", h)
			}
			tt.check(t, r)
			checkGolden(t, "request_"+tt.name+".golden.json", r.Body)
		})
	}
}

// TestStreamHeaders checks the key and the extra headers.
func TestStreamHeaders(t *testing.T) {
	t.Setenv("AGENTKERNEL_TEST_KEY", "sk-test-123")
	srv := openaitest.NewServer(t, openaitest.Text("ok"))
	p := localProvider(t, srv.URL(), Config{
		APIKeyEnv: "AGENTKERNEL_TEST_KEY",
		Headers:   map[string]string{"HTTP-Referer": "https://example.org/agentkernel", "X-Title": "agentkernel"},
	})
	if _, err := stream(t, context.Background(), p, userRequest("hi", nil), nil); err != nil {
		t.Fatal(err)
	}
	h := srv.Requests()[0].Header
	if got := h.Get("Authorization"); got != "Bearer sk-test-123" {
		t.Errorf("Authorization %q", got)
	}
	if h.Get("HTTP-Referer") != "https://example.org/agentkernel" || h.Get("X-Title") != "agentkernel" {
		t.Errorf("extra headers missing: %v", h)
	}
}

// TestStreamEnvIsolation checks that the client does not pick up openai-go's
// own environment variables: a key meant for OpenAI must not reach another
// server.
func TestStreamEnvIsolation(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-must-not-leak")
	t.Setenv("OPENAI_ORG_ID", "org-must-not-leak")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
	srv := openaitest.NewServer(t, openaitest.Text("ok"))
	p := localProvider(t, srv.URL(), Config{APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"})
	if _, err := stream(t, context.Background(), p, userRequest("hi", nil), nil); err != nil {
		t.Fatal(err)
	}
	h := srv.Requests()[0].Header
	for _, k := range []string{"Authorization", "OpenAI-Organization", "X-Leak"} {
		if v := h.Get(k); v != "" {
			t.Errorf("%s: %q was sent", k, v)
		}
	}
}

// TestStreamBadRequest checks requests that are refused before anything is
// sent.
func TestStreamBadRequest(t *testing.T) {
	good := userRequest("hi", nil)
	tests := []struct {
		name    string
		edit    func(r *kernel.Request)
		message string
	}{
		{"no model", func(r *kernel.Request) { r.Model = "" }, "names no model"},
		{"no messages", func(r *kernel.Request) { r.Messages = nil }, "no messages"},
		{"unknown role", func(r *kernel.Request) {
			r.Messages = append(r.Messages, kernel.Message{Role: "developer", Content: "x"})
		}, `message 2: unknown role "developer"`},
		{"tool message without id", func(r *kernel.Request) {
			r.Messages = append(r.Messages, kernel.Message{Role: kernel.RoleTool, ToolName: "fs.read", Content: "x"})
		}, `message 2: tool message (tool "fs.read") has no tool_call_id`},
		{"schema not an object", func(r *kernel.Request) {
			r.Tools = []kernel.ToolSpec{{Name: "bad", Schema: json.RawMessage(`[1]`)}}
		}, "tool bad: schema: not a JSON object"},
		{"schema null", func(r *kernel.Request) {
			r.Tools = []kernel.ToolSpec{{Name: "bad", Schema: json.RawMessage(`null`)}}
		}, "tool bad: schema: not a JSON object"},
		{"name collision", func(r *kernel.Request) {
			r.Tools = []kernel.ToolSpec{{Name: "fs.read"}, {Name: "fs__read"}}
		}, `tools "fs.read" and "fs__read" both become the OpenAI function name "fs__read"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.NewServer(t) // no steps: any request fails the test
			p := localProvider(t, srv.URL(), Config{})
			req := good
			req.Messages = append([]kernel.Message(nil), good.Messages...)
			tt.edit(&req)
			_, err := stream(t, context.Background(), p, req, nil)
			pe := providerError(t, err)
			if pe.Code != "invalid_request" || pe.Retryable || !strings.Contains(pe.Message, tt.message) {
				t.Errorf("got %v (code %q retryable %v), want invalid_request ~%q", err, pe.Code, pe.Retryable, tt.message)
			}
		})
	}
	t.Run("collision is a CollisionError", func(t *testing.T) {
		_, _, err := buildParams(kernel.Request{Model: "m", Messages: good.Messages, Tools: []kernel.ToolSpec{{Name: "a.b"}, {Name: "a__b"}}})
		var ce *toolname.CollisionError
		if !errors.As(err, &ce) || ce.Wire != "a__b" {
			t.Errorf("got %v", err)
		}
	})
}

func TestNew(t *testing.T) {
	t.Setenv("AGENTKERNEL_TEST_KEY", "sk-test")
	t.Setenv("AGENTKERNEL_TEST_EMPTY", "")
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" means success
		noKey   bool   // errors.Is(err, ErrNoAPIKey)
	}{
		{"openai with key", Config{APIKeyEnv: "AGENTKERNEL_TEST_KEY"}, "", false},
		{"openai without key", Config{APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"}, "environment variable AGENTKERNEL_TEST_UNSET_KEY is not set", true},
		{"empty key", Config{BaseURL: "https://openrouter.ai/api/v1", APIKeyEnv: "AGENTKERNEL_TEST_EMPTY"}, "environment variable AGENTKERNEL_TEST_EMPTY is not set", true},
		{"lan server without key", Config{BaseURL: "http://192.168.1.20:11434/v1", APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"}, "api_key_env names the variable", true},
		{"ollama on localhost", Config{BaseURL: "http://localhost:11434/v1", APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"}, "", false},
		{"127.0.0.1", Config{BaseURL: "http://127.0.0.1:8080/v1", APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"}, "", false},
		{"ipv6 loopback", Config{BaseURL: "http://[::1]:1234/v1", APIKeyEnv: "AGENTKERNEL_TEST_UNSET_KEY"}, "", false},
		{"bad scheme", Config{BaseURL: "ftp://example.com/v1"}, `base_url "ftp://example.com/v1": scheme must be http or https`, false},
		{"no host", Config{BaseURL: "http:///v1"}, "no host", false},
		{"not a URL", Config{BaseURL: "http://a b/"}, `base_url "http://a b/"`, false},
		{"credentials in URL", Config{BaseURL: "https://user:pw@example.com/v1", APIKeyEnv: "AGENTKERNEL_TEST_KEY"}, "must not carry credentials", false},
		{"query", Config{BaseURL: "https://example.com/v1?x=1", APIKeyEnv: "AGENTKERNEL_TEST_KEY"}, "must not have a query", false},
		{"bad env name", Config{APIKeyEnv: "MY-KEY"}, `api_key_env is not an environment variable name`, false},
		{"bad header name", Config{APIKeyEnv: "AGENTKERNEL_TEST_KEY", Headers: map[string]string{"X Bad": "v"}}, `headers: "X Bad" is not a valid header name`, false},
		{"header injection", Config{APIKeyEnv: "AGENTKERNEL_TEST_KEY", Headers: map[string]string{"X-Ok": "a\r\nX-Evil: 1"}}, "the value of X-Ok contains a line break", false},
		{"negative idle", Config{APIKeyEnv: "AGENTKERNEL_TEST_KEY", IdleTimeout: -1}, "idle timeout -1ns is negative", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if tt.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New succeeded, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrNoAPIKey) != tt.noKey {
				t.Errorf("errors.Is(err, ErrNoAPIKey) = %v, want %v", !tt.noKey, tt.noKey)
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Errorf("error %q shows the URL's password", err)
			}
		})
	}
}
