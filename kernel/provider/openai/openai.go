package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/wire"
)

// Name is the provider's name in errors and configuration ("model.provider").
const Name = "openai"

// DefaultBaseURL is the OpenAI API, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultAPIKeyEnv is the environment variable read when Config.APIKeyEnv is
// empty.
const DefaultAPIKeyEnv = "OPENAI_API_KEY"

// ErrNoAPIKey is returned by New when the API key's environment variable is
// unset or empty and the base URL is not a loopback address.
var ErrNoAPIKey = errors.New("no API key")

// Config configures a Provider. The zero value talks to the OpenAI API with
// the key in OPENAI_API_KEY. A Config is read by New and not kept.
type Config struct {
	// BaseURL is the API's base URL up to and including the version path,
	// such as "http://127.0.0.1:11434/v1" for Ollama; requests go to
	// BaseURL + "/chat/completions". Empty means DefaultBaseURL.
	BaseURL string
	// APIKeyEnv names the environment variable that holds the API key; the
	// key itself never appears in configuration. Empty means
	// DefaultAPIKeyEnv. New reads the variable once. It must be set and
	// non-empty unless BaseURL is a loopback address (localhost, 127.0.0.0/8,
	// [::1]): local servers need no key, and one is sent only if the variable
	// is set.
	APIKeyEnv string
	// HTTPClient sends the requests. Nil means a client of the package's own
	// that uses http.DefaultTransport. A client with a Timeout bounds the
	// whole stream, not just the wait for the first byte.
	HTTPClient *http.Client
	// Headers are extra HTTP headers sent with every request (OpenRouter's
	// HTTP-Referer and X-Title, a gateway's own token). Nil means none.
	Headers map[string]string
	// IdleTimeout ends a stream that sends nothing for this long (including
	// the wait for the response headers) with a retryable error. Zero means
	// no limit of its own: the caller's context bounds the call. Reasoning
	// models can think for minutes before their first token, so be generous.
	IdleTimeout time.Duration
	// Request shapes every request: parallel_tool_calls, tool_choice,
	// reasoning_effort. The zero value sends none of them.
	Request RequestOptions
	// Models overrides Request for the named models (the request's model,
	// which is a fallback's name when the kernel falls back): each setting
	// an override sets replaces the default's.
	Models map[string]RequestOptions
	// Logger receives debug lines about server quirks the provider works
	// around (a stream complete without [DONE], an empty tool call
	// dropped). Nil logs nothing.
	Logger hclog.Logger
}

// Provider is a kernel.Provider for OpenAI-compatible Chat Completions
// servers. It is safe for concurrent use.
type Provider struct {
	client   oa.Client
	baseURL  string
	idle     time.Duration
	defaults RequestOptions
	models   map[string]RequestOptions
	log      hclog.Logger
	// key is the API key sent, redacted from every error (a proxy may
	// echo it in its 401 body).
	key string
}

// New checks cfg and returns a Provider. Errors name the offending field
// (base_url, api_key_env, headers) or environment variable.
func New(cfg Config) (*Provider, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("openai: base_url %q: %w", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("openai: base_url %q: scheme must be http or https", base)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("openai: base_url %q: no host", base)
	}
	if u.User != nil {
		return nil, fmt.Errorf("openai: base_url %q: must not carry credentials; put the key in the variable named by api_key_env", wire.RedactURL(u))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("openai: base_url %q: must not have a query or fragment", base)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("openai: idle timeout %s is negative", cfg.IdleTimeout)
	}
	if err := cfg.Request.check("model"); err != nil {
		return nil, err
	}
	models := make(map[string]RequestOptions, len(cfg.Models))
	for name, o := range cfg.Models {
		if err := o.check("model.overrides." + name); err != nil {
			return nil, err
		}
		models[name] = o
	}

	env := cfg.APIKeyEnv
	if env == "" {
		env = DefaultAPIKeyEnv
	}
	if !wire.ValidEnvName(env) {
		return nil, errors.New("openai: api_key_env is not an environment variable name; it names the variable that holds the key, never the key itself (the value is not shown)")
	}
	key := os.Getenv(env)
	if key == "" && !wire.IsLoopback(u) {
		return nil, fmt.Errorf("openai: environment variable %s is not set; it must hold the API key for %s (api_key_env names the variable; only loopback servers may go without a key): %w", env, base, ErrNoAPIKey)
	}

	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport}
	}
	// The client is built from explicit options only: openai.NewClient
	// would also pick up OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_ORG_ID and
	// OPENAI_CUSTOM_HEADERS from the environment and could send a key to a
	// server it was not meant for.
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimSuffix(base, "/") + "/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // the kernel owns retries
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	for k, v := range cfg.Headers {
		if !wire.ValidHeaderName(k) {
			return nil, fmt.Errorf("openai: headers: %q is not a valid header name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("openai: headers: the value of %s contains a line break or NUL", k)
		}
		opts = append(opts, option.WithHeader(k, v))
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Provider{client: oa.Client{Options: opts}, baseURL: base, idle: cfg.IdleTimeout, defaults: cfg.Request, models: models,
		log: log, key: key}, nil
}

// errIdle is the cancellation cause when IdleTimeout fires.
var errIdle = errors.New("stream idle")

// maxErrorBody caps how much of an error response is read.
const maxErrorBody = 64 << 10

// Stream implements kernel.Provider: it sends req as one streaming chat
// completion request, calls emit for every text and reasoning fragment, and
// returns the assembled message once the server sends [DONE] (or closes
// the stream after the finish reason). Every error is a
// *kernel.ProviderError, and never contains the API key.
func (p *Provider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	resp, err := p.stream(ctx, req, emit)
	if err != nil {
		return resp, p.redactKey(err)
	}
	return resp, nil
}

// minKeyRedact is the shortest key redacted from errors: a shorter one
// ("ollama", "EMPTY", what local servers are given) is a word, not a
// secret, and would mangle the messages it appears in.
const minKeyRedact = 8

// redactKey removes the API key from err's message (a proxy that echoes
// the key in its error body, "Incorrect API key provided: sk-..."), before
// the error goes anywhere.
func (p *Provider) redactKey(err error) error {
	var pe *kernel.ProviderError
	if len(p.key) < minKeyRedact || !errors.As(err, &pe) {
		return err
	}
	if strings.Contains(pe.Message, p.key) {
		pe.Message = strings.ReplaceAll(pe.Message, p.key, "[REDACTED]")
	}
	if pe.Err != nil && strings.Contains(pe.Err.Error(), p.key) {
		pe.Err = errors.New(strings.ReplaceAll(pe.Err.Error(), p.key, "[REDACTED]"))
	}
	return err
}

func (p *Provider) stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	params, names, err := buildParams(req)
	if err != nil {
		return kernel.Response{}, &kernel.ProviderError{Provider: Name, Code: "invalid_request", Message: err.Error(), Err: err}
	}
	p.options(req.Model).apply(&params, offeredNames(req.Tools))
	if emit == nil {
		emit = func(kernel.Delta) {}
	}

	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idle *time.Timer
	if p.idle > 0 {
		idle = time.AfterFunc(p.idle, func() { cancel(errIdle) })
		defer idle.Stop()
	}

	var res *http.Response
	err = p.client.Post(ctx, "chat/completions", params, &res,
		option.WithJSONSet("stream", true),
		option.WithHeader("Accept", "text/event-stream"),
		option.WithMiddleware(statusMiddleware),
	)
	if err != nil {
		return kernel.Response{}, p.failure(parent, ctx, err, "send request")
	}
	defer res.Body.Close()
	if isJSON(res) {
		// A server that ignored "stream": true (or reports errors with
		// 200): read the body as a whole completion, or as an error.
		return p.completion(parent, ctx, res, names, emit)
	}

	var onLine func()
	if idle != nil {
		onLine = func() { idle.Reset(p.idle) }
	}
	acc := newAccumulator(names, emit)
	acc.log = p.log
	resp, err := readStream(ctx, res.Body, acc, onLine)
	if err != nil {
		pe := p.failure(parent, ctx, err, "read stream")
		if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); errors.Is(pe, ErrStreamCut) && mt != "text/event-stream" {
			pe.Message += fmt.Sprintf(" (the response's Content-Type is %q, not text/event-stream: is base_url an OpenAI-compatible API?)", res.Header.Get("Content-Type"))
		}
		return kernel.Response{}, pe
	}
	return resp, nil
}

// readStream reads an event stream to its [DONE] and returns the assembled
// response. A stream that ends without [DONE] after it delivered its
// finish reason is complete (ik_llama.cpp did that until mid-2025). Protocol
// failures (a malformed chunk, an error event, a stream that ends before
// its finish reason) are *kernel.ProviderError; a failing reader's error is
// returned as it is, and so is ctx's error once ctx is done (checked before
// every event, so that no delta is emitted after cancellation). onLine, when
// set, is called for every line read.
func readStream(ctx context.Context, body io.Reader, acc *accumulator, onLine func()) (kernel.Response, error) {
	sse := wire.NewSSEReader(body)
	sse.OnLine = onLine
	for {
		if err := ctx.Err(); err != nil {
			return kernel.Response{}, err
		}
		ev, err := sse.Next()
		if err != nil {
			var tooLong *wire.LineTooLongError
			switch {
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				if acc.finish != "" {
					acc.logger().Debug("stream ended without data: [DONE] after its finish reason; read as complete",
						"finish_reason", acc.finish, "events", sse.Events, "lines", sse.Line)
					return acc.response()
				}
				return kernel.Response{}, cutError(sse, err)
			case errors.As(err, &tooLong):
				return kernel.Response{}, malformed(tooLong.Line, tooLong.Error())
			}
			return kernel.Response{}, err
		}
		if wire.IsDone(ev.Data) {
			return acc.response()
		}
		if ev.Name == "error" {
			return kernel.Response{}, streamError(ev.Data, ev.Line)
		}
		if err := acc.add(ev.Data, ev.Line); err != nil {
			return kernel.Response{}, err
		}
	}
}

// statusMiddleware turns an HTTP error status into a *kernel.ProviderError
// before openai-go parses the body, so that every server's error shape (and
// a proxy's HTML page) gets the same treatment.
func statusMiddleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	defer res.Body.Close()
	body, rerr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	pe := httpError(res.StatusCode, body)
	if res.StatusCode == http.StatusNotFound {
		pe.Message += notFoundHint(req.Method, req.URL)
	}
	pe.RetryAfter = wire.RetryAfter(res.Header, time.Now())
	if rerr != nil && len(body) == 0 {
		pe.Err = rerr
	}
	return nil, pe
}

// failure turns an error from sending the request or reading the stream
// into a *kernel.ProviderError.
func (p *Provider) failure(parent, ctx context.Context, err error, what string) *kernel.ProviderError {
	// The context comes first: a cancelled read also looks like a cut stream.
	if perr := parent.Err(); perr != nil {
		code := "cancelled"
		if errors.Is(perr, context.DeadlineExceeded) {
			code = "deadline_exceeded"
		}
		return &kernel.ProviderError{Provider: Name, Code: code, Message: what + ": " + perr.Error(), Err: perr}
	}
	if errors.Is(context.Cause(ctx), errIdle) {
		return &kernel.ProviderError{Provider: Name, Code: "stream_idle", Retryable: true,
			Message: fmt.Sprintf("%s: the server sent nothing for %s", what, p.idle), Err: errIdle}
	}
	var pe *kernel.ProviderError
	if errors.As(err, &pe) {
		return pe
	}
	return &kernel.ProviderError{Provider: Name, Code: "connection", Retryable: wire.TransportRetryable(err),
		Message: fmt.Sprintf("%s to %s: %v", what, p.baseURL, err), Err: err}
}

func isJSON(res *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return mt == "application/json"
}

var _ kernel.Provider = (*Provider)(nil)
