// Package openaitest is a local OpenAI-compatible Chat Completions server for
// tests. It answers each POST to /v1/chat/completions with the next scripted
// Step (a text reply, tool calls, an HTTP error, or a recorded event stream
// replayed verbatim), records every request it receives, and fails the test
// clearly when a request arrives after the script has run out.
//
// A tool-using session is two steps:
//
//	srv := openaitest.NewServer(t,
//		openaitest.ToolCall("fs.read", `{"path":"README.md"}`),
//		openaitest.Text("The README says hello."),
//	)
//	// point the provider (or `kernel run --base-url`) at srv.URL()
//
// Tool names in steps are the kernel's names ("fs.read"); the server puts
// them on the wire the way the openai provider encodes them ("fs__read").
package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/toolname"
)

// Step is the server's answer to one request. Exactly one of three kinds:
// an HTTP error (Status set), a verbatim event stream (SSE set), or a reply
// built from Reasoning, Text and Calls.
type Step struct {
	// Reasoning is streamed first, as "reasoning_content" deltas.
	Reasoning string
	// Text is streamed as content deltas.
	Text string
	// Calls are streamed as tool-call deltas, arguments in fragments.
	Calls []Call
	// FinishReason defaults to "tool_calls" when there are calls and to
	// "stop" otherwise.
	FinishReason string
	// Usage is sent in the final usage chunk (when the request asked for
	// one). Nil means an estimate: a token per 4 bytes of request body and
	// of output.
	Usage *kernel.Usage
	// Cut ends the stream after the content, before the finish reason and
	// [DONE], as a dropped connection would.
	Cut bool

	// Status, when not zero, answers with this HTTP status and Body.
	Status int
	// Body is the error body; empty means an OpenAI-shaped error naming
	// the status. "{{api_key}}" in it is replaced by the bearer token the
	// request carried, as a proxy that echoes the key does.
	Body string
	// Header holds extra response headers (Retry-After on a 429).
	Header http.Header
	// Delay paces a rendered or recorded stream: the server waits this
	// long before each event, as a slow model does. A client gone away
	// ends the wait.
	Delay time.Duration
	// Stall, with SSE or a reply, stops sending after this many events and
	// holds the connection open until the client leaves (a server that
	// hangs mid-stream).
	Stall int

	// SSE, when not empty, is written verbatim as the response body (a
	// recorded stream, "data: ...\n\n" events ending with "data: [DONE]").
	SSE string
}

// Call is one scripted tool call. Name is the kernel's tool name. An empty ID
// becomes "call_<request>_<n>".
type Call struct {
	ID        string
	Name      string
	Arguments string
}

// Text is a step that answers with text.
func Text(text string) Step { return Step{Text: text} }

// ToolCall is a step that calls one tool; args is its argument JSON.
func ToolCall(name, args string) Step {
	return Step{Calls: []Call{{Name: name, Arguments: args}}}
}

// ToolCalls is a step that calls several tools in parallel.
func ToolCalls(calls ...Call) Step { return Step{Calls: calls} }

// Error is a step that answers with an HTTP error status and an
// OpenAI-shaped error body carrying message.
func Error(status int, message string) Step {
	typ, code := "invalid_request_error", "null"
	switch {
	case status == http.StatusUnauthorized:
		code = `"invalid_api_key"`
	case status == http.StatusTooManyRequests:
		typ, code = "requests", `"rate_limit_exceeded"`
	case status >= 500:
		typ = "server_error"
	}
	msg, _ := json.Marshal(message)
	return Step{Status: status, Body: fmt.Sprintf(`{"error":{"message":%s,"type":%q,"param":null,"code":%s}}`, msg, typ, code)}
}

// Raw is a step that replays a recorded event stream verbatim.
func Raw(sse string) Step { return Step{SSE: sse} }

// File is a step that replays the recorded event stream in the file at path.
func File(t testing.TB, path string) Step {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("openaitest: %v", err)
	}
	return Step{SSE: string(b)}
}

// WireName is the function name the openai provider sends for a kernel tool
// name ("fs.read" → "fs__read").
func WireName(name string) string { return toolname.Encode(name) }

// Server is a running test server. It is safe for concurrent use.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	mu      sync.Mutex
	steps   []Step
	respond func(r *Request, n int) Step
	reqs    []Request
	strict  bool
}

// NewResponder starts a server that answers request number n (from 1)
// with what f makes of it, for a script that reads the conversation.
func NewResponder(t testing.TB, f func(r *Request, n int) Step) *Server {
	t.Helper()
	s := &Server{t: t, respond: f}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// StrictHistory makes the server check every request's history the way
// Ollama does: each assistant tool call's arguments must parse as a JSON
// object, or the request is answered 400 "invalid tool call arguments"
// (Ollama's own message) and the step is not consumed.
func (s *Server) StrictHistory() {
	s.mu.Lock()
	s.strict = true
	s.mu.Unlock()
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

// URL is the base URL to configure ("http://127.0.0.1:PORT/v1").
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close stops the server and waits for the requests in flight.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Remaining is how many steps have not been served yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.steps) - len(s.reqs); n > 0 {
		return n
	}
	return 0
}

// maxBody caps a request body.
const maxBody = 32 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		s.t.Errorf("openaitest: unexpected request %s %s (only POST /v1/chat/completions is served)", r.Method, r.URL.Path)
		writeError(w, http.StatusNotFound, "openaitest: no route for "+r.Method+" "+r.URL.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		s.t.Errorf("openaitest: read request body: %v", err)
		writeError(w, http.StatusBadRequest, "openaitest: read request body: "+err.Error())
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if err := req.decode(); err != nil {
		s.t.Errorf("openaitest: request body: %v", err)
		writeError(w, http.StatusBadRequest, "openaitest: request body: "+err.Error())
		return
	}

	s.mu.Lock()
	if s.strict {
		for _, m := range req.Chat.Messages {
			for _, tc := range m.ToolCalls {
				var obj map[string]any
				if json.Unmarshal([]byte(tc.Function.Arguments), &obj) != nil || obj == nil {
					s.mu.Unlock()
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, `{"error":{"message":"invalid tool call arguments","type":"invalid_request_error","param":null,"code":null}}`)
					return
				}
			}
		}
	}
	n := len(s.reqs) // 0-based number of this request
	s.reqs = append(s.reqs, req)
	var step Step
	ok := n < len(s.steps) || s.respond != nil
	if ok && s.respond == nil {
		step = s.steps[n]
	}
	total := len(s.steps)
	respond := s.respond
	s.mu.Unlock()
	if respond != nil {
		step = respond(&req, n+1)
	}

	if !ok {
		msg := fmt.Sprintf("openaitest: request %d arrived but the script has only %d step(s)", n+1, total)
		s.t.Errorf("%s", msg)
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if !req.Chat.Stream && step.Status == 0 {
		s.t.Errorf("openaitest: request %d did not ask for a stream (\"stream\": true); only streaming is served", n+1)
		writeError(w, http.StatusBadRequest, "openaitest: only streaming requests are served")
		return
	}
	for k, v := range step.Header {
		w.Header()[k] = v
	}
	switch {
	case step.Status != 0:
		body := step.Body
		if body == "" {
			body = Error(step.Status, http.StatusText(step.Status)).Body
		}
		body = strings.ReplaceAll(body, "{{api_key}}", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(step.Status)
		io.WriteString(w, body)
	case step.SSE != "":
		writeStream(w, r, step, splitEvents(step.SSE))
	default:
		writeStream(w, r, step, render(step, &req, n+1))
	}
}

// writeStream writes events one by one, flushing each, as a real server
// streams them, paced and stalled as the step says.
func writeStream(w http.ResponseWriter, r *http.Request, step Step, events []string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	for i, ev := range events {
		if step.Stall > 0 && i == step.Stall {
			<-r.Context().Done() // hold the connection until the client leaves
			return
		}
		if step.Delay > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(step.Delay):
			}
		}
		if _, err := io.WriteString(w, ev); err != nil {
			return // the client went away
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(msg)
	fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","param":null,"code":"openaitest"}}`, b)
}
