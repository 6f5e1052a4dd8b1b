package kernel_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// step is one scripted provider call: text (and reasoning) streamed, then
// either err or a response.
type step struct {
	partial string // streamed before err
	text    string
	err     error
}

// stepProvider plays steps in order and records the model and messages of
// every request.
type stepProvider struct {
	mu     sync.Mutex
	steps  []step
	models []string
	reqs   [][]kernel.Message
}

func (p *stepProvider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	p.mu.Lock()
	n := len(p.models)
	p.models = append(p.models, req.Model)
	p.reqs = append(p.reqs, append([]kernel.Message(nil), req.Messages...))
	p.mu.Unlock()
	if n >= len(p.steps) {
		return kernel.Response{}, errors.New("stepProvider: no step left")
	}
	s := p.steps[n]
	if s.partial != "" {
		emit(kernel.Delta{Text: s.partial})
	}
	if s.err != nil {
		return kernel.Response{}, s.err
	}
	if s.text != "" {
		emit(kernel.Delta{Text: s.text})
	}
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: s.text}, Model: req.Model}, nil
}

func provErr(status int, code string, retryable bool) *kernel.ProviderError {
	return &kernel.ProviderError{Provider: "test", StatusCode: status, Code: code, Message: "scripted failure", Retryable: retryable}
}

// retryHarness is a kernel whose sleeps are recorded, never slept.
type retryHarness struct {
	k      *kernel.Kernel
	p      *stepProvider
	store  kernel.Store
	sleeps []time.Duration
	events []kernel.Event
}

func newRetryHarness(t *testing.T, pol kernel.RetryPolicy, fallbacks []string, steps ...step) *retryHarness {
	t.Helper()
	h := &retryHarness{p: &stepProvider{steps: steps}, store: memory.New()}
	pol.Sleep = func(ctx context.Context, d time.Duration) error {
		h.sleeps = append(h.sleeps, d)
		return ctx.Err()
	}
	if pol.Jitter == nil {
		pol.Jitter = func(max time.Duration) time.Duration { return max } // the ceiling, to assert it
	}
	k, err := kernel.New(kernel.Config{
		Provider: h.p, Store: h.store, Model: "primary", Fallbacks: fallbacks, Retry: pol,
		OnEvent: func(e kernel.Event) { h.events = append(h.events, e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.k = k
	return h
}

func (h *retryHarness) retries() []kernel.ProviderRetry {
	var out []kernel.ProviderRetry
	for _, e := range h.events {
		if r, ok := e.(kernel.ProviderRetry); ok {
			out = append(out, r)
		}
	}
	return out
}

func (h *retryHarness) messages(t *testing.T, id string) []kernel.Message {
	t.Helper()
	s, err := h.store.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Messages
}

func TestRetryRateLimitHonoursRetryAfter(t *testing.T) {
	limited := provErr(429, "rate_limit_exceeded", true)
	limited.RetryAfter = 3 * time.Second
	h := newRetryHarness(t, kernel.RetryPolicy{}, nil, step{err: limited}, step{text: "done"})
	res, err := h.k.Run(context.Background(), "", "hi")
	if err != nil || res.StopReason != kernel.StopCompleted || res.Output != "done" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	// The backoff ceiling of the first retry is 1s; the server asked for 3s.
	if len(h.sleeps) != 1 || h.sleeps[0] != 3*time.Second {
		t.Errorf("slept %v, want [3s] (Retry-After wins over a shorter backoff)", h.sleeps)
	}
	r := h.retries()
	if len(r) != 1 || r[0].Attempt != 2 || r[0].Cause != "429" || r[0].StatusCode != 429 || r[0].Delay != 3*time.Second || r[0].Model != "primary" {
		t.Errorf("provider.retry events %+v", r)
	}
	msgs := h.messages(t, res.SessionID)
	if len(msgs) != 2 || msgs[1].Content != "done" || msgs[1].Model != "primary" {
		t.Errorf("stored %+v", msgs)
	}
}

func TestRetryCutStreamSupersedesPartialText(t *testing.T) {
	cut := provErr(0, "stream_cut", true)
	h := newRetryHarness(t, kernel.RetryPolicy{}, nil, step{partial: "Hel", err: cut}, step{text: "Hello there"})
	res, err := h.k.Run(context.Background(), "", "hi")
	if err != nil || res.Output != "Hello there" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	r := h.retries()
	if len(r) != 1 || r[0].Cause != "stream_cut" || r[0].Superseded != 3 {
		t.Errorf("provider.retry %+v, want one stream_cut superseding 3 bytes", r)
	}
	// The superseded text was streamed before the retry event, the new
	// answer after it.
	var order []string
	for _, e := range h.events {
		switch e := e.(type) {
		case kernel.MessageDelta:
			order = append(order, e.Text)
		case kernel.ProviderRetry:
			order = append(order, "<retry>")
		}
	}
	if strings.Join(order, "|") != "Hel|<retry>|Hello there" {
		t.Errorf("event order %q", order)
	}
	msgs := h.messages(t, res.SessionID)
	var assistants int
	for _, m := range msgs {
		if m.Role == kernel.RoleAssistant {
			assistants++
			if m.Content != "Hello there" {
				t.Errorf("stored assistant message %q: the partial attempt was persisted", m.Content)
			}
		}
	}
	if assistants != 1 {
		t.Errorf("%d assistant messages stored, want exactly 1", assistants)
	}
}

func TestRetryNotRetried(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		cause string
	}{
		{"auth 401", provErr(401, "invalid_api_key", false), "auth"},
		{"forbidden 403", provErr(403, "", false), "auth"},
		{"quota 429", provErr(429, "insufficient_quota", false), "quota"},
		{"bad request 400", provErr(400, "invalid_request_error", false), "400"},
		{"unsupported parameter", provErr(400, "unsupported_parameter", false), "400"},
		{"context length", provErr(400, "context_length_exceeded", false), "context_length"},
		// llama.cpp marks it retryable in the stream; the code decides.
		{"llama.cpp context size in stream", provErr(0, "exceed_context_size_error", true), "context_length"},
		{"malformed", provErr(0, "malformed_chunk", false), "malformed_chunk"},
		{"plain error", errors.New("boom"), "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newRetryHarness(t, kernel.RetryPolicy{}, nil, step{err: tt.err}, step{text: "never"})
			res, err := h.k.Run(context.Background(), "", "hi")
			var mce *kernel.ModelCallError
			if !errors.As(err, &mce) || mce.Later || mce.Cause != tt.cause || mce.Attempts != 1 {
				t.Fatalf("err = %#v, want a ModelCallError{Later: false, Cause: %q, Attempts: 1}", err, tt.cause)
			}
			if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), "retrying will not help") {
				t.Errorf("error %q does not wrap the cause or say retrying will not help", err)
			}
			if len(h.p.models) != 1 || len(h.sleeps) != 0 || len(h.retries()) != 0 {
				t.Errorf("%d calls, slept %v: a %s error must not be retried", len(h.p.models), h.sleeps, tt.name)
			}
			if res.StopReason != kernel.StopError {
				t.Errorf("stop %q", res.StopReason)
			}
		})
	}
}

func TestRetryBackoffAndAttempts(t *testing.T) {
	busy := provErr(503, "", true)
	h := newRetryHarness(t, kernel.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 3 * time.Second}, nil,
		step{err: busy}, step{err: busy}, step{err: busy}, step{err: busy}, step{text: "never"})
	_, err := h.k.Run(context.Background(), "", "hi")
	var mce *kernel.ModelCallError
	if !errors.As(err, &mce) || !mce.Later || mce.Attempts != 4 || !strings.Contains(err.Error(), "after 4 attempts (retrying later may help)") {
		t.Fatalf("err = %v", err)
	}
	// Ceilings 1s, 2s, then 4s capped at 3s (the jitter returns the ceiling here).
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if len(h.sleeps) != len(want) {
		t.Fatalf("slept %v, want %v", h.sleeps, want)
	}
	for i := range want {
		if h.sleeps[i] != want[i] {
			t.Errorf("sleep %d = %s, want %s", i, h.sleeps[i], want[i])
		}
	}
}

func TestRetryFullJitter(t *testing.T) {
	busy := provErr(502, "", true)
	var maxes []time.Duration
	pol := kernel.RetryPolicy{BaseDelay: time.Second, Jitter: func(max time.Duration) time.Duration {
		maxes = append(maxes, max)
		return max / 4
	}}
	h := newRetryHarness(t, pol, nil, step{err: busy}, step{err: busy}, step{text: "ok"})
	if _, err := h.k.Run(context.Background(), "", "hi"); err != nil {
		t.Fatal(err)
	}
	if len(maxes) != 2 || maxes[0] != time.Second || maxes[1] != 2*time.Second {
		t.Errorf("jitter ceilings %v, want [1s 2s]", maxes)
	}
	if len(h.sleeps) != 2 || h.sleeps[0] != 250*time.Millisecond || h.sleeps[1] != 500*time.Millisecond {
		t.Errorf("slept %v: the delay must be the jittered value", h.sleeps)
	}
}

func TestRetryAfterBeyondCap(t *testing.T) {
	limited := provErr(429, "rate_limit_exceeded", true)
	limited.RetryAfter = 10 * time.Minute
	h := newRetryHarness(t, kernel.RetryPolicy{MaxRetryAfter: time.Minute}, nil, step{err: limited}, step{text: "never"})
	_, err := h.k.Run(context.Background(), "", "hi")
	var mce *kernel.ModelCallError
	if !errors.As(err, &mce) || !mce.Later || !strings.Contains(err.Error(), "asks to wait 10m0s") {
		t.Fatalf("err = %v", err)
	}
	if len(h.sleeps) != 0 || len(h.p.models) != 1 {
		t.Errorf("slept %v after %d calls: a wait beyond the cap is not waited for", h.sleeps, len(h.p.models))
	}
}

func TestRetryBudgetPerRun(t *testing.T) {
	busy := provErr(500, "server_error", true)
	h := newRetryHarness(t, kernel.RetryPolicy{MaxAttempts: 10, Budget: 2}, nil,
		step{err: busy}, step{err: busy}, step{err: busy}, step{text: "never"})
	_, err := h.k.Run(context.Background(), "", "hi")
	var mce *kernel.ModelCallError
	if !errors.As(err, &mce) || !mce.Later || mce.Attempts != 3 {
		t.Fatalf("err = %v, want a retry-later error after 3 attempts (budget 2 retries)", err)
	}
}

func TestRetryCancelledWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &retryHarness{p: &stepProvider{steps: []step{{err: provErr(429, "", true)}, {text: "never"}}}, store: memory.New()}
	k, err := kernel.New(kernel.Config{Provider: h.p, Store: h.store, Model: "m", Retry: kernel.RetryPolicy{
		Sleep: func(ctx context.Context, d time.Duration) error { cancel(); <-ctx.Done(); return ctx.Err() },
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, "", "hi")
	if !errors.Is(err, context.Canceled) || res.StopReason != kernel.StopCancelled || len(h.p.models) != 1 {
		t.Fatalf("Run = %+v, %v after %d calls", res, err, len(h.p.models))
	}
}

func TestFallbackModels(t *testing.T) {
	t.Run("primary missing", func(t *testing.T) {
		h := newRetryHarness(t, kernel.RetryPolicy{}, []string{"backup"},
			step{err: provErr(404, "model_not_found", false)}, step{text: "from backup"})
		res, err := h.k.Run(context.Background(), "", "hi")
		if err != nil || res.Output != "from backup" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if strings.Join(h.p.models, ",") != "primary,backup" || len(h.sleeps) != 0 {
			t.Errorf("models called %v, slept %v", h.p.models, h.sleeps)
		}
		r := h.retries()
		if len(r) != 1 || r[0].Fallback != "backup" || r[0].Cause != "model_missing" {
			t.Errorf("events %+v", r)
		}
		msgs := h.messages(t, res.SessionID)
		if msgs[len(msgs)-1].Model != "backup" {
			t.Errorf("the answer records model %q, want backup", msgs[len(msgs)-1].Model)
		}
	})
	t.Run("primary overloaded", func(t *testing.T) {
		busy := provErr(529, "overloaded_error", true)
		h := newRetryHarness(t, kernel.RetryPolicy{MaxAttempts: 2}, []string{"backup"},
			step{err: busy}, step{err: busy}, step{text: "from backup"})
		res, err := h.k.Run(context.Background(), "", "hi")
		if err != nil || res.Output != "from backup" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if strings.Join(h.p.models, ",") != "primary,primary,backup" {
			t.Errorf("models called %v", h.p.models)
		}
	})
	t.Run("auth is not a reason to switch", func(t *testing.T) {
		h := newRetryHarness(t, kernel.RetryPolicy{}, []string{"backup"}, step{err: provErr(401, "invalid_api_key", false)}, step{text: "never"})
		if _, err := h.k.Run(context.Background(), "", "hi"); err == nil || len(h.p.models) != 1 {
			t.Fatalf("err %v after %v", err, h.p.models)
		}
	})
	t.Run("every model fails", func(t *testing.T) {
		h := newRetryHarness(t, kernel.RetryPolicy{}, []string{"b1", "b2"},
			step{err: provErr(404, "model_not_found", false)}, step{err: provErr(404, "model_not_found", false)}, step{err: provErr(404, "model_not_found", false)})
		_, err := h.k.Run(context.Background(), "", "hi")
		var mce *kernel.ModelCallError
		if !errors.As(err, &mce) || mce.Later || mce.Attempts != 3 || strings.Join(h.p.models, ",") != "primary,b1,b2" {
			t.Fatalf("err %v after %v", err, h.p.models)
		}
	})
}

func TestEmptyResponse(t *testing.T) {
	t.Run("retried once then stops", func(t *testing.T) {
		h := newRetryHarness(t, kernel.RetryPolicy{}, nil, step{}, step{text: "   "}, step{text: "never"})
		res, err := h.k.Run(context.Background(), "", "hi")
		if !errors.Is(err, kernel.ErrEmptyResponse) || res.StopReason != kernel.StopEmptyResponse {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if len(h.p.models) != 2 {
			t.Errorf("%d calls, want 2", len(h.p.models))
		}
		var failed *kernel.RunFailed
		for _, e := range h.events {
			if f, ok := e.(kernel.RunFailed); ok {
				failed = &f
			}
		}
		if failed == nil || failed.StopReason != kernel.StopEmptyResponse {
			t.Errorf("run.failed %+v", failed)
		}
		if r := h.retries(); len(r) != 1 || r[0].Cause != "empty_response" {
			t.Errorf("retries %+v", r)
		}
	})
	t.Run("second answer counts", func(t *testing.T) {
		h := newRetryHarness(t, kernel.RetryPolicy{}, nil, step{}, step{text: "ok"})
		res, err := h.k.Run(context.Background(), "", "hi")
		if err != nil || res.Output != "ok" || res.StopReason != kernel.StopCompleted {
			t.Fatalf("Run = %+v, %v", res, err)
		}
	})
}

// TestFailedTurnNeverTwoUserMessages: a run that fails before the model
// answers leaves a marker, and the next prompt's request does not carry two
// user messages in a row.
func TestFailedTurnNeverTwoUserMessages(t *testing.T) {
	h := newRetryHarness(t, kernel.RetryPolicy{}, nil, step{err: provErr(400, "invalid_request_error", false)}, step{text: "second answer"})
	res, err := h.k.Run(context.Background(), "", "first question")
	if err == nil {
		t.Fatal("first run succeeded")
	}
	msgs := h.messages(t, res.SessionID)
	if len(msgs) != 2 || msgs[1].Role != kernel.RoleAssistant || !strings.Contains(msgs[1].Failed, "invalid_request_error") {
		t.Fatalf("after the failed turn: %+v", msgs)
	}
	res, err = h.k.Run(context.Background(), res.SessionID, "second question")
	if err != nil || res.Output != "second answer" {
		t.Fatalf("second Run = %+v, %v", res, err)
	}
	sent := h.p.reqs[1]
	for i := 1; i < len(sent); i++ {
		if sent[i].Role == kernel.RoleUser && sent[i-1].Role == kernel.RoleUser {
			t.Fatalf("request carries two user messages in a row: %+v", sent)
		}
	}
	if len(sent) != 1 || sent[0].Content != "second question" {
		t.Errorf("second request %+v, want only the new prompt", sent)
	}
	if got := h.messages(t, res.SessionID); len(got) != 4 {
		t.Errorf("stored %d messages, want the failed exchange kept (4)", len(got))
	}
}

// TestOldFailedTurnWithoutMarker: a session whose failed turn left a bare
// user message (written before failed markers existed) still never sends
// two user messages in a row.
func TestOldFailedTurnWithoutMarker(t *testing.T) {
	h := newRetryHarness(t, kernel.RetryPolicy{}, nil, step{text: "answer"})
	ctx := context.Background()
	id := "old-session"
	now := time.Now()
	err := h.store.Commit(ctx, id, kernel.Step{
		Meta:     kernel.SessionMeta{ID: id, Status: kernel.StatusFailed, LastSeq: 1, Created: now, Updated: now},
		Messages: []kernel.Message{{Seq: 1, Role: kernel.RoleUser, Content: "lost question", Time: now}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.k.Run(ctx, id, "new question"); err != nil {
		t.Fatal(err)
	}
	sent := h.p.reqs[0]
	if len(sent) != 1 || sent[0].Content != "new question" {
		t.Errorf("request %+v, want only the new prompt", sent)
	}
}

// summaryFlaky answers every summary request (the compaction's) with
// failures first, then a summary; every other request with big text.
type summaryFlaky struct {
	mu        sync.Mutex
	failures  []error // returned by the first summary calls, in order
	summaries int
	models    []string // the model of every summary call
}

func (p *summaryFlaky) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	last := req.Messages[len(req.Messages)-1].Content
	if !strings.Contains(last, "Write the new summary.") {
		text := strings.Repeat("x", 400)
		emit(kernel.Delta{Text: text})
		return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: text}, Model: req.Model}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.summaries++
	p.models = append(p.models, req.Model)
	if len(p.failures) > 0 {
		err := p.failures[0]
		p.failures = p.failures[1:]
		return kernel.Response{}, err
	}
	emit(kernel.Delta{Text: "SUMMARY-TEXT must not reach the answer stream"})
	return kernel.Response{Message: kernel.Message{Role: kernel.RoleAssistant, Content: "the summary"}, Model: req.Model}, nil
}

// TestCompactionSummaryRetries: the compaction summary goes through the
// same retries and fallbacks as a turn: a 429 is retried after its wait
// and reported, a missing compaction model falls back to the run's model,
// and the summary's stream is not shown as the answer.
func TestCompactionSummaryRetries(t *testing.T) {
	p := &summaryFlaky{failures: []error{
		provErr(404, "model_not_found", false), // the compaction model is missing
		provErr(429, "rate_limit_exceeded", true),
	}}
	var sleeps []time.Duration
	var events []kernel.Event
	var deltas strings.Builder
	k, err := kernel.New(kernel.Config{
		Provider: p, Store: memory.New(), Model: "primary", ContextWindow: 1200,
		Context: kernel.ContextConfig{Model: "summariser"},
		Retry: kernel.RetryPolicy{Sleep: func(ctx context.Context, d time.Duration) error {
			sleeps = append(sleeps, d)
			return ctx.Err()
		}},
		OnEvent: func(e kernel.Event) {
			events = append(events, e)
			if d, ok := e.(kernel.MessageDelta); ok {
				deltas.WriteString(d.Text)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := ""
	for i := range 8 {
		res, err := k.Run(context.Background(), id, "question "+strings.Repeat("y", 400))
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		id = res.SessionID
	}
	var retries []kernel.ProviderRetry
	summarised := false
	for _, e := range events {
		switch e := e.(type) {
		case kernel.ProviderRetry:
			retries = append(retries, e)
		case kernel.ContextCompacted:
			summarised = summarised || e.Kind == "summarised"
		}
	}
	if !summarised {
		t.Fatalf("no summary was made (summary calls %d, retries %+v)", p.summaries, retries)
	}
	if len(retries) != 2 || retries[0].Fallback != "primary" || retries[1].StatusCode != 429 || len(sleeps) != 1 {
		t.Fatalf("retries %+v sleeps %v: want a fallback from the missing summariser, then one waited 429 retry", retries, sleeps)
	}
	if len(p.models) < 3 || p.models[0] != "summariser" || p.models[1] != "primary" {
		t.Fatalf("summary calls went to %v", p.models)
	}
	if strings.Contains(deltas.String(), "SUMMARY-TEXT") {
		t.Fatal("the summary's stream was shown as the answer")
	}
}
