package openai

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// debugLog is a logger at debug level writing to a buffer.
func debugLog() (hclog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Debug}), &b
}

// TestToolsRefused: every server's way of refusing the tools field is
// kernel.CodeToolsUnsupported, not retried, with the server's words.
func TestToolsRefused(t *testing.T) {
	tests := []struct {
		fixture string
		status  int
		words   string
	}{
		{"ollama_0.12_does_not_support_tools.json", 400, "gemma3:4b does not support tools"},
		{"llamacpp_b5000_tools_requires_jinja.json", 500, "tools param requires --jinja flag"},
		{"llamacpp_b4600_tools_with_stream.json", 500, "Cannot use tools with stream"},
		{"vllm_0.6_auto_tool_choice.json", 400, `"auto" tool choice requires --enable-auto-tool-choice`},
		{"openrouter_no_tool_endpoints.json", 404, "No endpoints found that support tool use"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.fixture, ".json"), func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Step{Status: tt.status, Body: string(readFile(t, tt.fixture))})
			p := localProvider(t, srv.URL(), Config{})
			_, err := stream(t, context.Background(), p, userRequest("hi", offered), nil)
			pe := providerError(t, err)
			if pe.Code != kernel.CodeToolsUnsupported || pe.Retryable || pe.StatusCode != tt.status || !strings.Contains(pe.Message, tt.words) {
				t.Errorf("got %+v; want %s, not retryable, status %d, message ~%q", pe, kernel.CodeToolsUnsupported, tt.status, tt.words)
			}
		})
	}
	// The same words inside the stream (vLLM ≥ 0.10 sends errors there).
	t.Run("in the stream", func(t *testing.T) {
		pe := streamError([]byte(`{"error":{"message":"this model does not support tools","type":"BadRequestError","code":400}}`), 3)
		if pe.Code != kernel.CodeToolsUnsupported || pe.Retryable {
			t.Errorf("got %+v", pe)
		}
	})
	// Another 400 is left alone.
	t.Run("other errors", func(t *testing.T) {
		pe := httpError(400, []byte(`{"error":{"message":"messages: tool_call_id missing","type":"invalid_request_error"}}`))
		if pe.Code == kernel.CodeToolsUnsupported {
			t.Errorf("got %+v", pe)
		}
	})
}

// TestStreamCompleteWithoutDone: a stream that delivered its finish reason
// and then closed (ik_llama.cpp until mid-2025) is a complete answer.
func TestStreamCompleteWithoutDone(t *testing.T) {
	tests := []struct {
		fixture string
		text    string
		usage   kernel.Usage
	}{
		{"ikllamacpp_2025_no_done.sse", "The build passes.", kernel.Usage{InputTokens: 312, OutputTokens: 4}},
		// Closed before the usage chunk: complete, without usage.
		{"cut_after_finish.sse", "Done", kernel.Usage{}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.fixture, ".sse"), func(t *testing.T) {
			srv := openaitest.NewServer(t, openaitest.Raw(string(readFile(t, tt.fixture))))
			log, buf := debugLog()
			p := localProvider(t, srv.URL(), Config{Logger: log})
			resp, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if resp.Message.Content != tt.text || resp.FinishReason != "stop" || resp.Usage != tt.usage {
				t.Errorf("got %q finish %q usage %+v", resp.Message.Content, resp.FinishReason, resp.Usage)
			}
			if !strings.Contains(buf.String(), "without data: [DONE] after its finish reason") {
				t.Errorf("no debug line: %q", buf.String())
			}
		})
	}
}

// TestGhostToolCall: LM Studio's empty tool call after a text answer (no
// id, name or arguments) is dropped with a debug line, not malformed.
func TestGhostToolCall(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.Raw(string(readFile(t, "lmstudio_0.3.21_ghost_tool_call.sse"))))
	log, buf := debugLog()
	p := localProvider(t, srv.URL(), Config{Logger: log})
	resp, err := stream(t, context.Background(), p, userRequest("hi", offered), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Message.ToolCalls != nil || resp.Message.Content != `I've created hello.cpp; it prints "Hello, World!".` || resp.Usage.OutputTokens != 41 {
		t.Errorf("got %+v", resp)
	}
	if !strings.Contains(buf.String(), "dropped an empty tool call") {
		t.Errorf("no debug line: %q", buf.String())
	}
	// A call with arguments but no name is still malformed.
	bad := strings.Replace(string(readFile(t, "lmstudio_0.3.21_ghost_tool_call.sse")), `"type":"function"}`, `"type":"function","function":{"arguments":"{\"a\":1}"}}`, 1)
	srv2 := openaitest.NewServer(t, openaitest.Raw(bad))
	_, err = stream(t, context.Background(), localProvider(t, srv2.URL(), Config{}), userRequest("hi", offered), nil)
	if pe := providerError(t, err); pe.Code != "malformed_chunk" {
		t.Errorf("got %+v", pe)
	}
}

// TestKeyEchoRedacted: a proxy that echoes the key in its 401 body; the
// error the provider returns never carries the key.
func TestKeyEchoRedacted(t *testing.T) {
	const key = "gw-7Hq2ZpL0vX9mKe4R"
	t.Setenv("AGENTKERNEL_TEST_PROXY_KEY", key)
	srv := openaitest.NewServer(t, openaitest.Step{Status: http.StatusUnauthorized, Body: string(readFile(t, "proxy_401_echo_key.json"))})
	p := localProvider(t, srv.URL(), Config{APIKeyEnv: "AGENTKERNEL_TEST_PROXY_KEY"})
	_, err := stream(t, context.Background(), p, userRequest("hi", nil), nil)
	pe := providerError(t, err)
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+key {
		t.Fatalf("the server got %q: the test does not exercise an echo", got)
	}
	if strings.Contains(err.Error(), key) || !strings.Contains(pe.Message, "Incorrect API key provided: [REDACTED].") {
		t.Errorf("error = %v", err)
	}
	var wrapped error = &kernel.ModelCallError{Err: err, Cause: "auth"}
	if strings.Contains(wrapped.Error(), key) || !errors.As(wrapped, &pe) {
		t.Errorf("wrapped = %v", wrapped)
	}
}
