// Package anthropictest is a local server that emulates Anthropic's
// Messages API for tests. It answers each POST to /v1/messages with the
// next scripted Step (thinking, text, tool calls, an HTTP error, a cut
// stream, or a recorded event stream replayed verbatim), or with what a
// Responder makes of the request; it records every request it receives,
// and it reports prompt-cache usage the way the API does (see Cache).
//
//	srv := anthropictest.NewServer(t,
//		anthropictest.Step{Thinking: "Read it first.", Calls: []anthropictest.Call{{Name: "fs.read", Arguments: `{"path":"README.md"}`}}},
//		anthropictest.Text("The README says hello."),
//	)
//	// point the provider (or `kernel run --provider anthropic --base-url`) at srv.URL()
//
// Tool names in steps are the kernel's names ("fs.read"); the server puts
// them on the wire the way the anthropic provider encodes them ("fs__read").
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
)

// Step is the server's answer to one request. Exactly one of three kinds:
// an HTTP error (Status set), a verbatim event stream (SSE set), or a reply
// built from Thinking, Redacted, Text and Calls, in that order.
type Step struct {
	// Thinking is streamed first as a thinking block, in thinking_delta
	// pieces, then its Signature (a made-up one when empty) as a
	// signature_delta.
	Thinking  string
	Signature string
	// Redacted, when set, is a redacted_thinking block's data.
	Redacted string
	// Text is streamed as a text block.
	Text string
	// Calls are streamed as tool_use blocks, input in input_json_delta pieces.
	Calls []Call
	// StopReason defaults to "tool_use" with calls and "end_turn" without.
	StopReason string
	// OutputTokens overrides the estimate (four bytes a token of the output).
	OutputTokens int64
	// Cut ends the stream after the content blocks, before message_delta.
	Cut bool
	// CutInBlock, when not zero, ends the stream inside the N-th content
	// block (counting from 1), after its deltas and before its
	// content_block_stop, as a dropped connection would.
	CutInBlock int

	// Status, when not zero, answers with this HTTP status and Body.
	Status int
	// Body is the error body; empty means an API-shaped error for the status.
	Body string
	// Header holds extra response headers (retry-after on a 429).
	Header http.Header
	// Delay paces the stream: the server waits this long before each event.
	Delay time.Duration

	// SSE, when not empty, is written verbatim as the response body.
	SSE string
}

// Call is one scripted tool call. Name is the kernel's tool name. An empty
// ID becomes "toolu_<request>_<n>".
type Call struct {
	ID        string
	Name      string
	Arguments string
}

// Text is a step that answers with text.
func Text(text string) Step { return Step{Text: text} }

// Error is a step that answers with an HTTP error status and the API's
// error body for it.
func Error(status int, message string) Step {
	typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
		403: "permission_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
		500: "api_error", 504: "timeout_error", 529: "overloaded_error"}[status]
	if typ == "" {
		typ = "api_error"
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message},
		"request_id": "req_anthropictest"})
	return Step{Status: status, Body: string(b)}
}

// File is a step that replays the recorded event stream in the file at path.
func File(t testing.TB, path string) Step {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("anthropictest: %v", err)
	}
	return Step{SSE: string(b)}
}

// WireName is the tool name the anthropic provider sends for a kernel tool
// name ("fs.read" → "fs__read").
func WireName(name string) string { return toolname.Encode(name) }

// Responder answers request number n (from 1) when the server has no
// scripted steps.
type Responder func(r *Request, n int) Step

// Server is a running emulation. It is safe for concurrent use.
type Server struct {
	t   testing.TB
	srv *httptest.Server
	// Cache is the emulated prompt cache; requests with an explicit usage
	// do not touch it.
	Cache Cache

	mu      sync.Mutex
	steps   []Step
	respond Responder
	reqs    []Request
	usage   []Usage
}

// NewServer starts a server on 127.0.0.1 that answers with steps, one per
// request, in order. It is closed when the test ends.
func NewServer(t testing.TB, steps ...Step) *Server {
	t.Helper()
	s := &Server{t: t, steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// NewResponder starts a server that answers every request with what f
// makes of it.
func NewResponder(t testing.TB, f Responder) *Server {
	t.Helper()
	s := &Server{t: t, respond: f}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// URL is the base URL to configure ("http://127.0.0.1:PORT").
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server and waits for the requests in flight.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Usage returns the prompt usage the server reported for each request that
// got a reply, in order.
func (s *Server) Usage() []Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Usage(nil), s.usage...)
}

const maxBody = 32 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.t.Errorf("anthropictest: unexpected request %s %s (only POST /v1/messages is served)", r.Method, r.URL.Path)
		writeStep(w, r, Error(http.StatusNotFound, "anthropictest: no route for "+r.Method+" "+r.URL.Path), nil)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		s.t.Errorf("anthropictest: read request body: %v", err)
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if err := req.decode(); err != nil {
		s.t.Errorf("anthropictest: request body: %v", err)
		writeStep(w, r, Error(http.StatusBadRequest, "anthropictest: request body: "+err.Error()), nil)
		return
	}
	if n := req.Breakpoints(); n > 4 {
		writeStep(w, r, Error(http.StatusBadRequest, fmt.Sprintf("A maximum of 4 blocks with cache_control may be provided. Found %d.", n)), nil)
		return
	}
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, req)
	var step Step
	ok := true
	switch {
	case s.respond != nil:
	case n < len(s.steps):
		step = s.steps[n]
	default:
		ok = false
	}
	total := len(s.steps)
	respond := s.respond
	s.mu.Unlock()
	if !ok {
		msg := fmt.Sprintf("anthropictest: request %d arrived but the script has only %d step(s)", n+1, total)
		s.t.Errorf("%s", msg)
		writeStep(w, r, Error(http.StatusBadRequest, msg), nil)
		return
	}
	if respond != nil {
		step = respond(&req, n+1)
	}
	if !req.Messages.Stream && step.Status == 0 {
		s.t.Errorf("anthropictest: request %d did not ask for a stream (\"stream\": true)", n+1)
	}
	if step.Status != 0 || step.SSE != "" {
		writeStep(w, r, step, nil)
		return
	}
	u := s.Cache.Use(&req.Messages)
	s.mu.Lock()
	s.usage = append(s.usage, u)
	s.mu.Unlock()
	writeStep(w, r, step, render(step, req.Messages.Model, u, n+1))
}

// writeStep writes an error, a recorded stream, or the rendered events.
func writeStep(w http.ResponseWriter, r *http.Request, step Step, events []string) {
	for k, v := range step.Header {
		w.Header()[k] = v
	}
	if step.Status != 0 {
		body := step.Body
		if body == "" {
			body = Error(step.Status, http.StatusText(step.Status)).Body
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(step.Status)
		io.WriteString(w, body)
		return
	}
	if step.SSE != "" {
		events = splitEvents(step.SSE)
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	for _, ev := range events {
		if step.Delay > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(step.Delay):
			}
		}
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
