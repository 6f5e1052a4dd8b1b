package kernel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/backoff"
)

// ErrEmptyResponse is a generation that produced neither text nor tool
// calls, twice in a row. The run stops with StopEmptyResponse.
var ErrEmptyResponse = errors.New("the model returned an empty response (no text, no tool calls)")

// Why retries live here and not in providers: RATIONALE.md, "Retries live
// in the kernel, once".
//
// RetryPolicy says how the loop retries a failed model call. The zero value
// means the documented defaults; MaxAttempts 1 turns retries off.
//
// A call is retried when its error may go away by waiting: rate limits
// (HTTP 429 except an exhausted quota), overload, timeouts (408) and
// conflicts (409), server errors (5xx), connection failures, a stream cut or
// idle before it finished, and once, an empty generation. Authentication,
// quota, bad requests, unknown models and context-length errors are never
// retried. The delay is exponential backoff with full jitter (a random
// duration between 0 and min(MaxDelay, BaseDelay·2^(n-1))), and at least the
// server's Retry-After when it sent one.
type RetryPolicy struct {
	// MaxAttempts bounds the calls of one generation to one model,
	// including the first (default 4).
	MaxAttempts int
	// BaseDelay is the backoff's first ceiling (default 1s).
	BaseDelay time.Duration
	// MaxDelay caps the backoff (default 30s).
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After the loop waits for (default
	// 60s); a server that asks for longer ends the attempts at once, with an
	// error that says when to try again.
	MaxRetryAfter time.Duration
	// Budget bounds the retries of one run, over all its generations and
	// models (default 10).
	Budget int
	// Sleep waits for d or until ctx is done (default: a timer). Tests
	// replace it so that they never sleep for real.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a random duration in [0, max) (default math/rand/v2).
	Jitter func(max time.Duration) time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 4
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = time.Second
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = time.Minute
	}
	if p.Budget <= 0 {
		p.Budget = 10
	}
	if p.Sleep == nil {
		p.Sleep = sleepCtx
	}
	if p.Jitter == nil {
		p.Jitter = backoff.FullJitter
	}
	return p
}

// backoff is the delay before retry n (1 for the first retry).
func (p RetryPolicy) backoff(n int) time.Duration {
	return p.Jitter(backoff.Exponential{Base: p.BaseDelay, Max: p.MaxDelay}.Delay(n))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// failureClass is what the loop makes of a failed model call.
type failureClass struct {
	// retry: the same request may succeed after a wait.
	retry bool
	// missing: this model is not available here (unknown model, no
	// access); another model may be.
	missing bool
	// cause names the failure in one word or status: "429", "503",
	// "stream_cut", "connection", "auth", "quota", "context_length", ...
	cause string
}

// Codes that no wait fixes, whatever the status says.
var (
	authCodes    = []string{"invalid_api_key", "authentication_error", "permission_error", "permission_denied", "unauthorized"}
	quotaCodes   = []string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "quota_exceeded", "billing_error"}
	contextCodes = []string{"context_length_exceeded", "exceed_context_size_error", "string_above_max_length", "context_window_exceeded"}
	missingCodes = []string{"model_not_found", "not_found_error", "NotFoundError"}
	badReqCodes  = []string{"invalid_request", "invalid_request_error", "invalid_type", "invalid_value", "BadRequestError",
		"malformed_chunk", "unsupported_parameter", "unsupported_value", "invalid_prompt", "content_filter"}
)

func hasCode(code string, list []string) bool {
	for _, c := range list {
		if strings.EqualFold(code, c) {
			return true
		}
	}
	return false
}

// classifyFailure decides about a failed model call from the error's HTTP status,
// code and type. Errors that are not *ProviderError are not retried.
func classifyFailure(err error) failureClass {
	var pe *ProviderError
	if !errors.As(err, &pe) {
		return failureClass{cause: "error"}
	}
	code := pe.Code
	switch {
	case code == CodeToolsUnsupported: // whatever the status (llama.cpp sends 500)
		return failureClass{cause: code}
	case hasCode(code, quotaCodes):
		return failureClass{cause: "quota"}
	case hasCode(code, contextCodes):
		return failureClass{cause: "context_length"}
	case hasCode(code, authCodes) || pe.StatusCode == 401:
		return failureClass{cause: "auth"}
	case hasCode(code, missingCodes) || pe.StatusCode == 404:
		return failureClass{missing: true, cause: "model_missing"}
	case code == "cancelled" || code == "deadline_exceeded":
		return failureClass{cause: code}
	}
	if s := pe.StatusCode; s != 0 {
		switch {
		case s == 429 || s == 408 || s == 409 || s == 425 || s >= 500:
			return failureClass{retry: true, cause: strconv.Itoa(s)}
		case s == 403:
			return failureClass{cause: "auth"}
		}
		return failureClass{cause: strconv.Itoa(s)}
	}
	if hasCode(code, badReqCodes) {
		return failureClass{cause: code}
	}
	cause := code
	if cause == "" {
		cause = "error"
	}
	// Without a status the provider knows best: a refused connection may
	// go away, a certificate the client rejects will not.
	return failureClass{retry: pe.Retryable, cause: cause}
}

// ModelCallError is a model call that failed for good: Attempts calls were
// made (over all the models tried), and Later says whether the same request
// may succeed if tried again later.
type ModelCallError struct {
	Attempts int
	Later    bool
	Cause    string
	Err      error
}

func (e *ModelCallError) Error() string {
	var b strings.Builder
	b.WriteString("model call failed")
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.Later {
		b.WriteString(" (retrying later may help)")
	} else {
		// Not "cause: ...": that reads as a credential assignment to a
		// scrubber ("auth: retrying" would lose its verb).
		fmt.Fprintf(&b, " (%s; retrying will not help)", e.Cause)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *ModelCallError) Unwrap() error { return e.Err }

// retryAfterOf is the server's Retry-After, when err carries one.
func retryAfterOf(err error) time.Duration {
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.RetryAfter
	}
	return 0
}

// isEmpty reports whether a generation has nothing to act on (a text
// protocol answer that broke the rules has its Raw text to correct).
func isEmpty(m *Message) bool {
	return strings.TrimSpace(m.Content) == "" && len(m.ToolCalls) == 0 && strings.TrimSpace(m.RawText()) == ""
}

// streamOnce is one provider call under Config.ModelTimeout. streamed is
// how many bytes of text and reasoning it passed on before it ended.
func (r *run) streamOnce(ctx context.Context, req Request, sink func(Delta)) (resp Response, streamed int, err error) {
	k := r.k
	cctx := r.dl.start(ctx, time.Now(), k.cfg.ModelTimeout)
	defer cctx.end()
	r.streamed = 0 // counted by onDelta, bound once per run
	resp, err = k.cfg.Provider.Stream(cctx, req, sink)
	streamed = r.streamed
	if err != nil {
		if ctx.Err() != nil {
			return Response{}, streamed, ctx.Err()
		}
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return Response{}, streamed, fmt.Errorf("model call timed out after %s: %w", k.cfg.ModelTimeout, err)
		}
		return Response{}, streamed, err
	}
	return resp, streamed, nil
}

// emitRetry reports a retry (fallback empty) or a switch to the model
// fallback.
func (r *run) emitRetry(attempt int, delay time.Duration, cause, model, fallback string, streamed int, err error) {
	r.k.emitIf(func() Event {
		e := ProviderRetry{Attempt: attempt, Delay: delay, Error: err.Error(), Cause: cause, Model: model,
			Fallback: fallback, Superseded: streamed}
		var pe *ProviderError
		if errors.As(err, &pe) {
			e.StatusCode = pe.StatusCode
		}
		return e
	})
}

// unanswered is the Failed marker for a prompt that got no answer, or nil
// when the history does not end with a user message.
func (r *run) unanswered(reason string) []Message {
	if n := len(r.msgs); n == r.sysN || r.msgs[n-1].Role != RoleUser {
		return nil
	}
	return []Message{{Role: RoleAssistant, Failed: reason}}
}

// dirtyFrom returns the index of the first message at or after from that
// withoutFailed must leave out (a Failed marker, or a user message right
// after a user message) or that carries a hook's edits of a request, or
// -1.
func dirtyFrom(msgs []Message, from int) int {
	for i := from; i < len(msgs); i++ {
		if msgs[i].Failed != "" || msgs[i].Hooks != nil && len(msgs[i].Hooks.Edits) > 0 ||
			i > 0 && msgs[i].Role == RoleUser && msgs[i-1].Role == RoleUser {
			return i
		}
	}
	return -1
}

// history is withoutFailed(r.msgs), scanning only the messages appended
// since the last clean result: the loop only appends, so a clean prefix
// stays clean (a new backing array, after growth or a reload, is scanned
// again from the start).
func (r *run) history() []Message {
	if len(r.msgs) == 0 {
		return r.msgs
	}
	if r.cleanBase != &r.msgs[0] || r.clean > len(r.msgs) {
		r.clean, r.cleanBase = 0, &r.msgs[0]
	}
	if dirtyFrom(r.msgs, r.clean) >= 0 {
		return withoutFailed(r.msgs)
	}
	r.clean = len(r.msgs)
	return r.msgs
}

// withoutFailed leaves out of a request every Failed marker and the user
// message it answers, so that a request never carries two user messages in
// a row. A session written before markers existed may still end a failed
// turn with a bare user message: when two user messages meet, the earlier
// one is left out too. It applies the edits before_model hooks made to
// earlier requests (applyEdits), so a request sends what the model saw.
// It returns msgs itself when there is nothing to leave out or edit.
func withoutFailed(msgs []Message) []Message {
	if dirtyFrom(msgs, 0) < 0 {
		return msgs
	}
	msgs = applyEdits(msgs)
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		k := len(out)
		if k > 0 && out[k-1].Role == RoleUser && (m.Failed != "" || m.Role == RoleUser) {
			out = out[:k-1] // the prompt that got no answer
		}
		if m.Failed == "" {
			out = append(out, m)
		}
	}
	return out
}
