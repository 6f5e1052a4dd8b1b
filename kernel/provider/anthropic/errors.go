package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/wire"
)

// Sentinel causes, wrapped by the *kernel.ProviderError that Stream returns.
var (
	// ErrMalformedEvent is an event that is not what the protocol allows:
	// invalid JSON, a field of the wrong type, a delta for a block that
	// never started, an overlong line.
	ErrMalformedEvent = errors.New("malformed event")
	// ErrStreamCut is a stream that ended before its stop reason.
	ErrStreamCut = errors.New("stream ended before message_stop")
	// ErrRefusal is an answer the model ended with stop_reason "refusal".
	ErrRefusal = errors.New("the model refused to continue")
)

func malformed(line int, msg string) *kernel.ProviderError {
	where := "malformed stream"
	if line > 0 {
		where = fmt.Sprintf("malformed event at line %d", line)
	}
	return &kernel.ProviderError{Provider: Name, Code: "malformed_chunk", Message: where + ": " + msg, Err: ErrMalformedEvent}
}

// cutError is a stream that ended before its stop reason: retryable, never
// a success. The kernel starts the generation again, so a tool_use block
// that had started is not run twice: nothing of this attempt is kept.
func cutError(sse *wire.SSEReader, acc *accumulator, err error) *kernel.ProviderError {
	how := "the connection closed"
	if errors.Is(err, io.ErrUnexpectedEOF) {
		how = "the connection closed inside an event"
	}
	open := ""
	if b := acc.openBlock(); b != "" {
		open = ", inside a " + b + " block"
	}
	return &kernel.ProviderError{
		Provider:  Name,
		Code:      "stream_cut",
		Retryable: true,
		Message:   fmt.Sprintf("%s after %d events (%d lines)%s, before message_stop", how, sse.Events, sse.Line, open),
		Err:       fmt.Errorf("%w: %w", ErrStreamCut, err),
	}
}

// apiError is the Messages API's error body:
// {"type":"error","error":{"type":"overloaded_error","message":"Overloaded",
// "details":{"error_code":"..."}},"request_id":"req_..."}.
type apiError struct {
	Type  string `json:"type"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Details *struct {
			ErrorCode string `json:"error_code"`
		} `json:"details"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// parseError reads an error body; ok is false when body is not one.
func parseError(body []byte) (typ, code, msg, requestID string, ok bool) {
	var e apiError
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Type == "" && e.Error.Message == "" {
		return "", "", "", "", false
	}
	if e.Error.Details != nil {
		code = e.Error.Details.ErrorCode
	}
	return e.Error.Type, code, e.Error.Message, e.RequestID, true
}

// contextTooLong recognises the API's words for a prompt over the model's
// context window (400 invalid_request_error): "prompt is too long: 210311
// tokens > 200000 maximum", and "input length and `max_tokens` exceed
// context limit: 198000 + 8192 > 200000".
func contextTooLong(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "prompt is too long") || strings.Contains(m, "exceed context limit")
}

// classify fills Code and Retryable from the error's type and status.
func classify(pe *kernel.ProviderError, typ, code string) *kernel.ProviderError {
	pe.Code = typ
	if code != "" {
		pe.Code = code
	}
	switch {
	case contextTooLong(pe.Message):
		pe.Code, pe.Retryable = "context_length_exceeded", false
	case pe.StatusCode != 0:
		pe.Retryable = pe.StatusCode == http.StatusTooManyRequests || pe.StatusCode == http.StatusRequestTimeout ||
			pe.StatusCode == http.StatusConflict || pe.StatusCode >= 500
	default: // inside the stream: the request was accepted
		switch typ {
		case "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "billing_error", "request_too_large":
			pe.Retryable = false
		default: // overloaded_error, api_error, rate_limit_error, timeout_error, ...
			pe.Retryable = true
		}
	}
	return pe
}

// httpError maps an HTTP error status and its body.
func httpError(status int, body []byte) *kernel.ProviderError {
	typ, code, msg, id, ok := parseError(body)
	if !ok {
		msg = wire.TextExcerpt(body)
		if msg == "" {
			msg = http.StatusText(status)
		}
	}
	if id != "" {
		msg += " (request " + id + ")"
	}
	return classify(&kernel.ProviderError{Provider: Name, StatusCode: status, Message: msg}, typ, code)
}

// bodyError reads an error object sent with a 2xx status.
func bodyError(status int, body []byte) (*kernel.ProviderError, bool) {
	typ, code, msg, _, ok := parseError(body)
	if !ok {
		return nil, false
	}
	return classify(&kernel.ProviderError{Provider: Name, Message: msg}, typ, code), true
}

// streamError is an "error" event: the API sends one when generation fails
// after the 200 status went out (overloaded_error mid-stream, most often),
// so it is retryable unless its type says the request is at fault.
func streamError(data []byte, line int) *kernel.ProviderError {
	typ, code, msg, _, ok := parseError(data)
	if !ok {
		return malformed(line, "error event without an error object: "+excerpt(data))
	}
	return classify(&kernel.ProviderError{Provider: Name, Message: fmt.Sprintf("error event at line %d: %s", line, msg)}, typ, code)
}

// excerpt quotes the start of data for an error message.
func excerpt(data []byte) string {
	const max = 120
	if len(data) > max {
		return fmt.Sprintf("%q...", data[:max])
	}
	return fmt.Sprintf("%q", data)
}
