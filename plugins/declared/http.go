package declared

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/itchyny/gojq"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/tool"
)

// Defaults of an HTTP tool.
const (
	DefaultHTTPTimeout      = 30 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxOutputBytes   = 32 << 10
)

// DefaultContentTypes are the answers an HTTP tool accepts by default:
// JSON and text.
var DefaultContentTypes = []string{"application/json", "application/*+json", "text/*", "application/problem+json", "application/xml"}

var bodyMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch}

// HTTPTool is a declared HTTP tool: one request, built from the call's
// arguments by the configured templates, sent through the tool's guarded
// client (internal/egress); the answer mapped to a result or a tool error.
// It is safe for concurrent use.
type HTTPTool struct {
	spec    tool.Spec
	method  string
	url     urlTemplate
	headers []header
	body    *valueTemplate
	// rest: without a body template, a body method sends the arguments
	// the URL and the headers do not use.
	used     []string
	secrets  map[string]string
	redact   redactor
	client   *http.Client
	timeout  time.Duration
	jq       *gojq.Code
	maxBody  int
	maxOut   int
	accepted []string
	granted  string
}

type header struct {
	name string
	val  template
}

// newHTTP builds the tool of c; problems are errors about one field
// (fieldError).
func newHTTP(c HTTPConfig, o Options) (*HTTPTool, []string, error) {
	var notes []string
	method := strings.ToUpper(c.Method)
	if method == "" {
		method = http.MethodGet
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil, nil, fieldErr("method", "%q is not GET, HEAD, OPTIONS, POST, PUT, PATCH or DELETE", c.Method)
	}
	schema, err := parseArgSchema(c.Args)
	if err != nil {
		return nil, nil, fieldErr("args", "%v", err)
	}
	t := &HTTPTool{method: method, maxBody: orDefault(c.Response.MaxBytes, DefaultMaxResponseBytes),
		maxOut: orDefault(c.Response.MaxOutputBytes, DefaultMaxOutputBytes), timeout: orDefault(c.Timeout.D(), DefaultHTTPTimeout),
		accepted: c.Response.ContentTypes}
	if t.accepted == nil {
		t.accepted = DefaultContentTypes
	}
	if t.url, err = parseURLTemplate(c.URL); err != nil {
		return nil, nil, fieldErr("url", "%v", err)
	}
	pathArgs, queryArgs := t.url.args()
	if err := schema.check(append(pathArgs, queryArgs...)); err != nil {
		return nil, nil, fieldErr("url", "%v", err)
	}
	if err := schema.requires(pathArgs); err != nil {
		return nil, nil, fieldErr("url", "%v", err)
	}
	t.used = append(pathArgs, queryArgs...)
	secretNames := t.url.secrets()
	for _, name := range sortedKeys(c.Headers) {
		if !validHeaderName(name) {
			return nil, nil, fieldErr("headers."+name, "%q is not a header name", name)
		}
		tm, err := parseTemplate(c.Headers[name])
		if err != nil {
			return nil, nil, fieldErr("headers."+name, "%v", err)
		}
		if err := schema.check(tm.args()); err != nil {
			return nil, nil, fieldErr("headers."+name, "%v", err)
		}
		t.used = append(t.used, tm.args()...)
		secretNames = append(secretNames, tm.secrets()...)
		t.headers = append(t.headers, header{name: http.CanonicalHeaderKey(name), val: tm})
	}
	if c.Body != nil {
		if !slices.Contains(bodyMethods, method) {
			return nil, nil, fieldErr("body", "a %s request has no body (body is for POST, PUT and PATCH)", method)
		}
		vt, err := parseValueTemplate(c.Body)
		if err != nil {
			return nil, nil, fieldErr("body", "%v", err)
		}
		var bad error
		vt.walk(func(tm template) {
			if err := schema.check(tm.args()); err != nil && bad == nil {
				bad = err
			}
			secretNames = append(secretNames, tm.secrets()...)
		})
		if bad != nil {
			return nil, nil, fieldErr("body", "%v", bad)
		}
		t.body = &vt
	}
	if t.secrets, err = resolveSecrets(secretNames, o.getenv()); err != nil {
		return nil, nil, fieldErr("headers", "%v", err)
	}
	t.redact = newRedactor(t.secrets)
	if c.Response.JQ != "" {
		q, err := gojq.Parse(c.Response.JQ)
		if err != nil {
			return nil, nil, fieldErr("response.jq", "%v", err)
		}
		if t.jq, err = gojq.Compile(q); err != nil {
			return nil, nil, fieldErr("response.jq", "%v", err)
		}
	}
	for i, ct := range t.accepted {
		if !strings.Contains(ct, "/") {
			return nil, nil, fieldErr(fmt.Sprintf("response.content_types[%d]", i), "%q is not a media type (type/subtype, e.g. application/json or text/*)", ct)
		}
	}
	ec, note, err := egressConfig(c, t.url, t.headers, o)
	if err != nil {
		return nil, nil, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	t.granted = "egress: " + strings.Join(ec.Hosts, ",")
	if len(ec.Networks) > 0 {
		t.granted += fmt.Sprintf(" networks:%v", ec.Networks)
	}
	if ec.InsecureSkipVerify {
		t.granted += " TLS-UNVERIFIED"
	}
	if t.client, err = egress.NewClient(ec); err != nil {
		return nil, nil, fieldErr("egress.hosts", "%v", err)
	}
	tier := c.Tier
	if tier == "" {
		tier = tool.TierSideEffecting
		if method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions {
			tier = tool.TierReadOnly
		}
	}
	source := SourceHTTP
	if c.OpenAPI != "" {
		source = SourceOpenAPI + c.OpenAPI
	}
	t.spec = tool.Spec{Name: c.Name, Description: c.Description, Schema: schema.raw, Tier: tier, Timeout: t.timeout + time.Second, Source: source, Tags: []string{"http"}}
	return t, notes, nil
}

// egressConfig is the tool's egress: its hosts (the URL's by default),
// granted networks, TLS settings, and the header names that carry its
// secrets, dropped on a redirect to another host.
func egressConfig(c HTTPConfig, u urlTemplate, headers []header, o Options) (egress.Config, string, error) {
	e := c.Egress
	ec := egress.Config{Hosts: e.Hosts, MaxRedirects: e.MaxRedirects, InsecureSkipVerify: e.InsecureSkipTLSVerify,
		Resolver: o.Resolver, Network: o.Network}
	switch {
	case e.Hosts == nil:
		ec.Hosts = []string{u.base.Host}
	case len(e.Hosts) == 0:
		return ec, "", fieldErr("egress.hosts", "is empty: list the hosts the tool may connect to, or leave hosts out to allow only the URL's host (%s)", u.base.Host)
	}
	for i, h := range ec.Hosts {
		if err := egress.ParseHost(h); err != nil {
			return ec, "", fieldErr(fmt.Sprintf("egress.hosts[%d]", i), "%v", err)
		}
	}
	if d, err := egress.NewDialer(egress.Config{Hosts: ec.Hosts}); err == nil {
		port := u.base.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.base.Scheme]
		}
		if err := d.Allowed(u.base.Hostname(), port); err != nil {
			return ec, "", fieldErr("egress.hosts", "the URL's host %s is not in the list: %v", u.base.Host, err)
		}
	}
	for i, n := range e.Networks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			a, aerr := netip.ParseAddr(n)
			if aerr != nil {
				return ec, "", fieldErr(fmt.Sprintf("egress.networks[%d]", i), "%q is not a CIDR prefix (10.0.0.0/8) or an address", n)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		ec.Networks = append(ec.Networks, p)
	}
	if e.MaxRedirects < -1 {
		return ec, "", fieldErr("egress.max_redirects", "must be -1 (none followed), 0 (the default, 5) or more")
	}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return ec, "", fieldErr("egress.ca_file", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return ec, "", fieldErr("egress.ca_file", "%s holds no PEM certificate", e.CAFile)
		}
		ec.RootCAs = pool
	}
	for _, h := range headers {
		if len(h.val.secrets()) > 0 {
			ec.SensitiveHeaders = append(ec.SensitiveHeaders, h.name)
		}
	}
	note := ""
	if e.InsecureSkipTLSVerify {
		note = fmt.Sprintf("http tool %s: TLS certificate verification is OFF (egress.insecure_skip_tls_verify): anyone on the path to %s can read and change its requests, secrets included", c.Name, u.base.Host)
	}
	return ec, note, nil
}

// Spec describes the tool.
func (t *HTTPTool) Spec() tool.Spec { return t.spec }

// Close closes the tool's idle connections.
func (t *HTTPTool) Close() { t.client.CloseIdleConnections() }

// Call sends the request the arguments make and returns the answer.
func (t *HTTPTool) Call(ctx context.Context, raw json.RawMessage) (tool.Result, error) {
	res, err := t.call(ctx, raw)
	res.Content = t.redact.String(res.Content)
	return res, t.redact.Error(err)
}

func (t *HTTPTool) call(ctx context.Context, raw json.RawMessage) (tool.Result, error) {
	args, err := decodeArgs(raw)
	if err != nil {
		return tool.Result{}, err
	}
	req, err := t.request(ctx, args)
	if err != nil {
		return tool.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	resp, err := t.client.Do(req.WithContext(ctx))
	if err != nil {
		return tool.Result{}, t.sendError(ctx, err)
	}
	defer resp.Body.Close()
	return t.answer(ctx, resp)
}

// request builds the HTTP request of a call.
func (t *HTTPTool) request(ctx context.Context, args map[string]any) (*http.Request, error) {
	u, err := t.url.render(args, t.secrets)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	var hasBody bool
	switch {
	case t.body != nil:
		v, err := t.body.build(args, t.secrets)
		if err != nil {
			return nil, err
		}
		b, err := marshal(v)
		if err != nil {
			return nil, err
		}
		body, hasBody = bytes.NewReader(b), true
	case slices.Contains(bodyMethods, t.method):
		rest := map[string]any{}
		for k, v := range args {
			if !slices.Contains(t.used, k) {
				rest[k] = v
			}
		}
		if len(rest) > 0 {
			b, err := marshal(rest)
			if err != nil {
				return nil, err
			}
			body, hasBody = bytes.NewReader(b), true
		}
	}
	req, err := http.NewRequestWithContext(ctx, t.method, u.String(), body)
	if err != nil {
		return nil, tool.Errorf(tool.CodeInvalidArgs, "the request: %v", err)
	}
	req.URL = u // keep the path's escaping exactly as rendered
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", strings.Join(t.accepted, ", "))
	req.Header.Set("User-Agent", "agentkernel")
	for _, h := range t.headers {
		v, err := h.val.render(args, t.secrets, nil)
		if errors.Is(err, errAbsent) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, tool.Errorf(tool.CodeInvalidArgs, "header %s: the value has a line break or a NUL byte", h.name)
		}
		req.Header.Set(h.name, v)
	}
	return req, nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, tool.Errorf(tool.CodeInvalidArgs, "the body: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// sendError is a request that got no answer, as a tool error.
func (t *HTTPTool) sendError(ctx context.Context, err error) error {
	var re *egress.RefusedError
	switch {
	case errors.As(err, &re):
		return tool.Errorf(tool.CodePermissionDenied, "%s %s: %v", t.method, t.url.base.Host, re)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return tool.Errorf(tool.CodeTimeout, "%s %s: no answer within %s", t.method, t.url.base.Host, t.timeout)
	case ctx.Err() != nil:
		return tool.Errorf(tool.CodeCancelled, "%s %s: cancelled", t.method, t.url.base.Host)
	}
	return tool.Errorf(tool.CodeUnavailable, "%s %s: %v", t.method, t.url.base.Host, err)
}

// Options are what the kernel gives Build: none of it is configuration.
type Options struct {
	// File is the configuration file, for errors.
	File string
	// Workspace is the kernel's workspace: a command tool's default
	// working directory, granted read-write as for run_command.
	Workspace string
	// Getenv reads the kernel's environment (nil: os.LookupEnv).
	Getenv func(string) (string, bool)
	// Resolver and Network replace the system's for HTTP tools (tests).
	Resolver egress.Resolver
	Network  egress.Network
	// CommandGrant builds a command tool's grant from its sandbox additions
	// and env (nil: Build refuses command tools).
	CommandGrant CommandGranter
}

func (o Options) getenv() func(string) (string, bool) {
	if o.Getenv != nil {
		return o.Getenv
	}
	return os.LookupEnv
}

var _ kernel.Tool = (*HTTPTool)(nil)
