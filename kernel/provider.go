package kernel

import (
	"context"
	"fmt"
	"time"
)

// Provider streams one model response. Stream sends req to the model, calls
// emit for every text or reasoning fragment as it arrives (on the calling
// goroutine, in order), and returns the complete assistant message with the
// tool calls fully assembled. Stream must return promptly once ctx is done
// and must never hang on a stream that stops mid-way. Implementations must be
// safe for concurrent use.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Delta)) (Response, error)
}

// Request is what one generation sees.
type Request struct {
	Model string
	// Messages is the conversation, system message first when there is one.
	// The slice belongs to the caller and must not be modified or retained.
	Messages []Message
	// Tools are the tools offered in this generation. Empty means no tools
	// are offered, and providers must then omit the tools field entirely.
	Tools []ToolSpec
}

// DeltaKind says what a Delta carries.
type DeltaKind uint8

// The kinds of Delta.
const (
	DeltaText DeltaKind = iota
	DeltaReasoning
)

// Delta is a fragment of a response as it streams in.
type Delta struct {
	Kind DeltaKind
	Text string
}

// Response is one complete generation.
type Response struct {
	// Message is the assistant message (Role RoleAssistant; Seq and Time are
	// set by the loop).
	Message      Message
	Usage        Usage
	FinishReason string
	// Model is the model that answered, when the provider reports it.
	Model string

	// text is set by the loop for an answer read with the text protocol.
	text *textAnswer
}

// ProviderError is a failed model call. Retryable says whether the same
// request may succeed later (rate limits, overload, server errors, a dropped
// stream); authentication and bad requests are not retryable.
type ProviderError struct {
	Provider   string // "openai", "scripted"
	StatusCode int    // HTTP status, 0 when there was no response
	Code       string // the API's error code or type, when it sent one
	Message    string
	Retryable  bool
	// RetryAfter is how long the server asked the client to wait (the
	// Retry-After header), zero when it did not say.
	RetryAfter time.Duration
	Err        error
}

func (e *ProviderError) Error() string {
	s := e.Provider
	if e.StatusCode != 0 {
		s += fmt.Sprintf(": HTTP %d", e.StatusCode)
	}
	if e.Code != "" {
		// In parentheses: "invalid_api_key: Incorrect ..." would read as a
		// credential assignment to a scrubber.
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && e.Message == "" {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ProviderError) Unwrap() error { return e.Err }
