package anthropic

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

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/internal/wire"
)

// Name is the provider's name in errors and configuration ("model.provider").
const Name = "anthropic"

// DefaultBaseURL is the Anthropic API, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultAPIKeyEnv is the environment variable read when Config.APIKeyEnv is
// empty.
const DefaultAPIKeyEnv = "ANTHROPIC_API_KEY"

// ErrNoAPIKey is returned by New when the API key's environment variable is
// unset or empty and the base URL is not a loopback address.
var ErrNoAPIKey = errors.New("no API key")

// maxContinuations bounds the requests one generation may continue after
// a pause_turn stop.
const maxContinuations = 4

// Config configures a Provider. The zero value talks to the Anthropic API
// with the key in ANTHROPIC_API_KEY. A Config is read by New and not kept.
type Config struct {
	// BaseURL is the API's base URL without the version path, such as
	// "https://api.anthropic.com"; requests go to BaseURL + "/v1/messages".
	// Empty means DefaultBaseURL.
	BaseURL string
	// APIKeyEnv names the environment variable that holds the API key
	// (sent as the bearer token, as the SDK does for API version 2026-10-21). Empty means DefaultAPIKeyEnv. New reads it once;
	// it must be set unless BaseURL is a loopback address.
	APIKeyEnv string
	// HTTPClient sends the requests. Nil means a client of the package's own
	// that uses http.DefaultTransport.
	HTTPClient *http.Client
	// Headers are extra HTTP headers sent with every request (anthropic-beta,
	// a gateway's token). Nil means none.
	Headers map[string]string
	// IdleTimeout ends a stream that sends nothing for this long (including
	// the wait for the response headers) with a retryable error. Zero means
	// no limit of its own. The API sends ping events while a model thinks.
	IdleTimeout time.Duration
	// Request shapes every request (max_tokens, thinking, effort, tool
	// choice, cache breakpoints).
	Request RequestOptions
	// Models overrides Request for the named models: each setting an
	// override sets replaces the default's.
	Models map[string]RequestOptions
	// Logger receives debug lines (a stream complete without message_stop,
	// a continuation after pause_turn). Nil logs nothing.
	Logger hclog.Logger
}

// Provider is a kernel.Provider for Anthropic's Messages API. It is safe
// for concurrent use.
type Provider struct {
	client   sdk.Client
	baseURL  string
	idle     time.Duration
	defaults RequestOptions
	models   map[string]RequestOptions
	log      hclog.Logger
	key      string
}

// New checks cfg and returns a Provider. Errors name the offending field
// or environment variable.
func New(cfg Config) (*Provider, error) {
	base := strings.TrimSuffix(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("anthropic: base_url %q: %w", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("anthropic: base_url %q: scheme must be http or https", base)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("anthropic: base_url %q: no host", base)
	}
	if u.User != nil {
		return nil, fmt.Errorf("anthropic: base_url %q: must not carry credentials; put the key in the variable named by api_key_env", wire.RedactURL(u))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("anthropic: base_url %q: must not have a query or fragment", base)
	}
	if strings.HasSuffix(u.Path, "/v1") {
		return nil, fmt.Errorf("anthropic: base_url %q: leave out the /v1 (requests go to base_url/v1/messages)", base)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("anthropic: idle timeout %s is negative", cfg.IdleTimeout)
	}
	if err := cfg.Request.check("model"); err != nil {
		return nil, err
	}
	if err := cfg.Request.checkBudget("model"); err != nil {
		return nil, err
	}
	models := make(map[string]RequestOptions, len(cfg.Models))
	for name, o := range cfg.Models {
		where := "model.overrides." + name
		if err := o.check(where); err != nil {
			return nil, err
		}
		if err := cfg.Request.over(o).checkBudget(where); err != nil {
			return nil, err
		}
		models[name] = o
	}

	env := cfg.APIKeyEnv
	if env == "" {
		env = DefaultAPIKeyEnv
	}
	if !wire.ValidEnvName(env) {
		return nil, errors.New("anthropic: api_key_env is not an environment variable name; it names the variable that holds the key, never the key itself (the value is not shown)")
	}
	key := os.Getenv(env)
	if key == "" && !wire.IsLoopback(u) {
		return nil, fmt.Errorf("anthropic: environment variable %s is not set; it must hold the API key for %s (api_key_env names the variable; only loopback servers may go without a key): %w", env, base, ErrNoAPIKey)
	}

	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport}
	}
	// Explicit options only: the SDK's defaults would read
	// ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL,
	// ANTHROPIC_CUSTOM_HEADERS and profile files, and could send a key to
	// a server it was not meant for. Its own spans and trace headers are
	// off: the kernel's telemetry makes the chat span and its transport
	// carries traceparent.
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base + "/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // the kernel owns retries
		option.WithoutOpenTelemetry(),
		option.WithOpenTelemetryPropagation(false),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	for k, v := range cfg.Headers {
		if !wire.ValidHeaderName(k) {
			return nil, fmt.Errorf("anthropic: headers: %q is not a valid header name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("anthropic: headers: the value of %s contains a line break or NUL", k)
		}
		opts = append(opts, option.WithHeader(k, v))
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Provider{client: sdk.NewClient(opts...), baseURL: base, idle: cfg.IdleTimeout, defaults: cfg.Request,
		models: models, log: log, key: key}, nil
}

// errIdle is the cancellation cause when IdleTimeout fires.
var errIdle = errors.New("stream idle")

// maxErrorBody caps how much of an error response is read.
const maxErrorBody = 64 << 10

// Stream implements kernel.Provider: it sends req as one streaming Messages
// request, calls emit for every text and thinking fragment, and returns the
// assembled message once the server sends message_stop. A pause_turn stop
// is continued at once, up to four times, into the same message. Every
// error is a *kernel.ProviderError and never contains the API key.
func (p *Provider) Stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	resp, err := p.stream(ctx, req, emit)
	if err != nil {
		return resp, p.redactKey(err)
	}
	return resp, nil
}

// minKeyRedact is the shortest key redacted from errors.
const minKeyRedact = 8

// redactKey removes the API key from err's message (a proxy that echoes
// it in an error body).
func (p *Provider) redactKey(err error) error {
	var pe *kernel.ProviderError
	if len(p.key) < minKeyRedact || !errors.As(err, &pe) {
		return err
	}
	pe.Message = strings.ReplaceAll(pe.Message, p.key, "[REDACTED]")
	if pe.Err != nil && strings.Contains(pe.Err.Error(), p.key) {
		pe.Err = errors.New(strings.ReplaceAll(pe.Err.Error(), p.key, "[REDACTED]"))
	}
	return err
}

func (p *Provider) stream(ctx context.Context, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	opts := p.options(req.Model)
	params, names, err := buildParams(req, opts)
	if err != nil {
		return kernel.Response{}, &kernel.ProviderError{Provider: Name, Code: "invalid_request", Message: err.Error(), Err: err}
	}
	if emit == nil {
		emit = func(kernel.Delta) {}
	}
	acc := newAccumulator(names, emit)
	for n := 0; ; n++ {
		if err := p.send(ctx, params, acc); err != nil {
			return kernel.Response{}, err
		}
		if acc.stop != "pause_turn" || n >= maxContinuations {
			break
		}
		// The API paused a long turn: sending the answer so far back as the
		// last assistant message lets the model continue it. The pieces
		// become one message.
		p.log.Debug("stop_reason pause_turn: continuing the turn", "model", req.Model, "continuation", n+1)
		cont, err := acc.assistantParam()
		if err != nil {
			return kernel.Response{}, err
		}
		params.Messages = append(params.Messages[:len(params.Messages):len(params.Messages)], cont)
		acc.next()
	}
	return acc.response()
}

// send makes one streaming request and reads its events into acc.
func (p *Provider) send(ctx context.Context, params sdk.MessageNewParams, acc *accumulator) error {
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idle *time.Timer
	if p.idle > 0 {
		idle = time.AfterFunc(p.idle, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	var res *http.Response
	err := p.client.Post(ctx, "v1/messages", params, &res,
		option.WithJSONSet("stream", true),
		option.WithHeader("Accept", "text/event-stream"),
		option.WithMiddleware(statusMiddleware),
	)
	if err != nil {
		return p.failure(parent, ctx, err, "send request")
	}
	defer res.Body.Close()
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
		body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		if pe, ok := bodyError(res.StatusCode, body); ok {
			return pe
		}
		return &kernel.ProviderError{Provider: Name, StatusCode: res.StatusCode, Code: "not_a_stream",
			Message: "the server answered the streaming request with application/json, not an event stream: " + excerpt(body)}
	}
	var onLine func()
	if idle != nil {
		onLine = func() { idle.Reset(p.idle) }
	}
	if err := readStream(ctx, res.Body, acc, onLine); err != nil {
		return p.failure(parent, ctx, err, "read stream")
	}
	return nil
}

// readStream reads one response's events into acc, to message_stop. A
// stream that ends after its stop reason (message_delta) but before
// message_stop is complete; one that ends earlier is cut (retryable, never
// a truncated success). ctx is checked before every event, so that no
// delta is emitted after cancellation.
func readStream(ctx context.Context, body io.Reader, acc *accumulator, onLine func()) error {
	sse := wire.NewSSEReader(body)
	sse.OnLine = onLine
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ev, err := sse.Next()
		if err != nil {
			var tooLong *wire.LineTooLongError
			switch {
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				if acc.stop != "" && acc.started {
					acc.logger().Debug("stream ended without message_stop after its stop reason; read as complete",
						"stop_reason", acc.stop, "events", sse.Events)
					return nil
				}
				return cutError(sse, acc, err)
			case errors.As(err, &tooLong):
				return malformed(tooLong.Line, tooLong.Error())
			}
			return err
		}
		done, err := acc.add(ev.Name, ev.Data, ev.Line)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// statusMiddleware turns an HTTP error status into a *kernel.ProviderError
// before the SDK parses the body.
func statusMiddleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	defer res.Body.Close()
	body, rerr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	pe := httpError(res.StatusCode, body)
	pe.RetryAfter = wire.RetryAfter(res.Header, time.Now())
	if rerr != nil && len(body) == 0 {
		pe.Err = rerr
	}
	return nil, pe
}

// failure turns an error from sending the request or reading the stream
// into a *kernel.ProviderError.
func (p *Provider) failure(parent, ctx context.Context, err error, what string) *kernel.ProviderError {
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

var _ kernel.Provider = (*Provider)(nil)
