package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/wire"
)

// Sentinel causes, wrapped by the *kernel.ProviderError that Stream returns.
var (
	// ErrMalformedChunk is a chunk or event that is not what the protocol
	// allows: invalid JSON, a field of the wrong type, an overlong line.
	ErrMalformedChunk = errors.New("malformed chunk")
	// ErrStreamCut is a stream that ended before "data: [DONE]".
	ErrStreamCut = errors.New("stream ended before [DONE]")
)

func malformed(line int, msg string) *kernel.ProviderError {
	where := "malformed stream"
	if line > 0 {
		where = fmt.Sprintf("malformed chunk at line %d", line)
	}
	return &kernel.ProviderError{Provider: Name, Code: "malformed_chunk", Message: where + ": " + msg, Err: ErrMalformedChunk}
}

// cutError is a stream that ended before [DONE]: retryable, never a success.
func cutError(sse *wire.SSEReader, err error) *kernel.ProviderError {
	how := "the connection closed"
	if errors.Is(err, io.ErrUnexpectedEOF) {
		how = "the connection closed inside an event"
	}
	return &kernel.ProviderError{
		Provider:  Name,
		Code:      "stream_cut",
		Retryable: true,
		Message:   fmt.Sprintf("%s after %d events (%d lines) without data: [DONE]", how, sse.Events, sse.Line),
		Err:       fmt.Errorf("%w: %w", ErrStreamCut, err),
	}
}

// streamError is an error the server sent inside the stream, either as a
// chunk with an "error" member or as an "event: error" event. Servers send
// these when generation fails after the 200 status went out, so they are
// retryable unless their code says the request itself is at fault.
func streamError(data []byte, line int) *kernel.ProviderError {
	code, msg, ok := parseErrorBody(data)
	if !ok {
		msg = excerpt(data)
	}
	pe := &kernel.ProviderError{Provider: Name, Code: code, Message: fmt.Sprintf("error event at line %d: %s", line, msg)}
	if status, err := strconv.Atoi(code); err == nil && status >= 400 && status < 600 {
		pe.Retryable = retryableStatus(status, "")
	} else {
		pe.Retryable = retryableCode(code)
	}
	return refusedTools(pe)
}

// httpError maps an HTTP error status and its body.
func httpError(status int, body []byte) *kernel.ProviderError {
	code, msg, ok := parseErrorBody(body)
	if !ok {
		msg = wire.TextExcerpt(body)
		if msg == "" {
			msg = http.StatusText(status)
		}
	}
	return refusedTools(&kernel.ProviderError{
		Provider:   Name,
		StatusCode: status,
		Code:       code,
		Message:    msg,
		Retryable:  retryableStatus(status, code),
	})
}

// notFoundHint is what a 404 adds to the server's message: the URL the
// request went to (without its query and user information), and, when its
// path has no version segment ("/v1", "/v1beta", "/api/v1"), the
// question a newcomer needs: servers answer a base URL without /v1 with a
// bare "404 page not found" (Ollama, vLLM, llama.cpp, LM Studio serve
// the API under /v1).
func notFoundHint(method string, u *url.URL) string {
	if u == nil {
		return ""
	}
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	hint := fmt.Sprintf(" (%s %s", method, shown.String())
	base := strings.TrimSuffix(u.Path, "/chat/completions")
	versioned := false
	for _, seg := range strings.Split(base, "/") {
		if len(seg) > 1 && seg[0] == 'v' && seg[1] >= '0' && seg[1] <= '9' {
			versioned = true
		}
	}
	if !versioned {
		want := url.URL{Scheme: u.Scheme, Host: u.Host, Path: strings.TrimSuffix(base, "/") + "/v1"}
		hint += fmt.Sprintf("; does base_url end in /v1? Most OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio) serve the API under it: base_url %s", want.String())
	}
	return hint + ")"
}

// toolsRefusals are what servers answer when a model cannot take the
// "tools" field, lower-cased. Each is matched as a substring of the
// error's message; the sources are the servers' own code.
var toolsRefusals = []string{
	// Ollama, a model whose template has no tools (400):
	// "registry.ollama.ai/library/gemma3:4b does not support tools".
	"does not support tools",
	// llama.cpp's server started without --jinja (500 server_error).
	"tools param requires --jinja flag",
	// llama.cpp's server from b4500 or so until streamed tool calls
	// landed (b5300 or so), for tools with "stream": true (500).
	"cannot use tools with stream",
	// vLLM without --enable-auto-tool-choice and --tool-call-parser (400):
	// "\"auto\" tool choice requires --enable-auto-tool-choice and
	// --tool-call-parser to be set".
	"tool choice requires --enable-auto-tool-choice",
	// OpenRouter, a model no provider serves with tools (404).
	"no endpoints found that support tool use",
	// Gateways and smaller servers.
	"does not support tool calling",
	"does not support function calling",
	"tool calling is not supported",
	"function calling is not supported",
}

// refusedTools marks an error that says the server will not take the
// tools field for this model: kernel.CodeToolsUnsupported, never retried
// (the kernel switches a model in auto mode to the text protocol).
func refusedTools(pe *kernel.ProviderError) *kernel.ProviderError {
	msg := strings.ToLower(pe.Message)
	for _, r := range toolsRefusals {
		if strings.Contains(msg, r) {
			pe.Code, pe.Retryable = kernel.CodeToolsUnsupported, false
			break
		}
	}
	return pe
}

// retryableStatus: rate limits (except an exhausted quota, which waiting
// does not fix), timeouts, conflicts and server errors may succeed later;
// every other status will fail the same way again.
func retryableStatus(status int, code string) bool {
	switch {
	case status == http.StatusTooManyRequests:
		return code != "insufficient_quota"
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status >= 500:
		return true
	}
	return false
}

// retryableCode classifies an error that came without a useful HTTP status.
func retryableCode(code string) bool {
	switch code {
	case "invalid_request_error", "invalid_api_key", "authentication_error", "permission_error",
		"not_found_error", "model_not_found", "context_length_exceeded", "insufficient_quota",
		"exceed_context_size_error", "unsupported_parameter", "unsupported_value",
		"invalid_prompt", "content_filter", "BadRequestError", "NotFoundError":
		return false
	}
	return true
}

// errorObject is the error object of OpenAI's {"error": {...}} body, which
// compatible servers copy with variations: llama.cpp sends a numeric code,
// older vLLM the object's fields at the top level.
type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// parseErrorBody reads an error body in any of the shapes OpenAI-compatible
// servers send: {"error": {...}} (OpenAI, llama.cpp, LM Studio, OpenRouter),
// {"error": "text"} (Ollama), {"message": ..., "type": ...} (vLLM before
// 0.6), {"detail": "text"} (FastAPI-based gateways). ok is false when the
// body is none of them.
func parseErrorBody(body []byte) (code, message string, ok bool) {
	var top struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
		errorObject
	}
	if json.Unmarshal(body, &top) != nil {
		return "", "", false
	}
	var text string
	switch {
	case len(top.Error) > 0 && top.Error[0] == '{':
		var o errorObject
		if json.Unmarshal(top.Error, &o) != nil {
			return "", "", false
		}
		return o.code(), o.Message, o.Message != "" || o.code() != ""
	case len(top.Error) > 0 && json.Unmarshal(top.Error, &text) == nil && text != "":
		return "", text, true
	case top.Message != "":
		return top.errorObject.code(), top.Message, true
	case len(top.Detail) > 0 && json.Unmarshal(top.Detail, &text) == nil && text != "":
		return "", text, true
	}
	return "", "", false
}

// code is the error's code when it has a meaningful one, else its type. A
// numeric code (llama.cpp repeats the HTTP status there) says less than the
// type.
func (o errorObject) code() string {
	var s string
	if json.Unmarshal(o.Code, &s) == nil && s != "" {
		return s
	}
	if o.Type != "" {
		return o.Type
	}
	var n json.Number
	if json.Unmarshal(o.Code, &n) == nil {
		return n.String()
	}
	return ""
}
