package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/kernel"
)

// apiError is every error the API returns, as
// {"error":{"code":…,"message":…,"field":…,"state":…}}.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request field that is wrong (400).
	Field string `json:"field,omitempty"`
	// State is the current state of what the request wanted to change
	// (409).
	State string `json:"state,omitempty"`
	// retryAfter, in seconds, is sent as Retry-After (429, 503).
	retryAfter int
}

func (e *apiError) Error() string { return e.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badField(field, format string, args ...any) *apiError {
	e := errorf(http.StatusBadRequest, "invalid_request", format, args...)
	e.Field = field
	return e
}

func conflict(state, format string, args ...any) *apiError {
	e := errorf(http.StatusConflict, "conflict", format, args...)
	e.State = state
	return e
}

var errNotFound = &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "not found"}

func notFound(what, id string) *apiError {
	return errorf(http.StatusNotFound, "not_found", "%s %q not found", what, id)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(true) // HTML-significant characters stay escaped in every response
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"encode response"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// statusClientClosed is what the access log records for a request whose
// client went away before the answer (nginx's 499): nothing failed on the
// server, and nothing is sent.
const statusClientClosed = 499

// writeError writes err as the API's error object; an error that is not an
// *apiError is a 500 whose message is logged, not sent. When the client
// has gone (the request's context is done), whatever failed failed for
// that reason: the access log says 499 and the error log nothing.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		w.WriteHeader(statusClientClosed)
		return
	}
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, kernel.ErrStoreUnavailable):
		s.logError("%s %s: %v", r.Method, r.URL.Path, err)
		ae = errorf(http.StatusServiceUnavailable, "store_unavailable", "the session store cannot be reached: retry later")
		ae.retryAfter = 2
	default:
		s.logError("%s %s: %v", r.Method, r.URL.Path, err)
		ae = errorf(http.StatusInternalServerError, "internal", "internal error (the server log has the details)")
	}
	if ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
	}
	writeJSON(w, ae.Status, map[string]*apiError{"error": ae})
}

// decodeBody decodes a JSON object body into v: a wrong content type is
// 415, a body over the limit 413, malformed JSON or an unknown or
// mistyped field 400 naming the field.
func (s *Server) decodeBody(r *http.Request, v any) error {
	ct := r.Header.Get("Content-Type")
	if mt, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(strings.ToLower(mt)) != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be JSON (Content-Type: application/json), not %q", ct)
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, jsonFields(reflect.TypeOf(v))...)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badField("", "the body has data after its JSON value")
	}
	return nil
}

// jsonError turns a decoding error into a 400 naming the field, or a 413.
// fields are the body's field names, for a misspelt one's suggestion.
func jsonError(err error, fields ...string) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "the body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return badField("", "the body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badField("", "the body ends inside its JSON value")
	case errors.As(err, &se):
		return badField("", "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return badField("", "the body must be a JSON object, not %s", te.Value)
		}
		return badField(field, "field %q: want %s, got %s", field, te.Type.String(), te.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return badField(f, "unknown field %q%s", f, config.DidYouMean(f, fields))
	}
	return badField("", "malformed JSON: %v", err)
}

// statusWriter records what a handler wrote, for the access log, and
// passes Flush and the write deadline through.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessRecord is one line of the access log: no body, no query values,
// no header but the key's name.
type accessRecord struct {
	Time     string  `json:"time"`
	Method   string  `json:"method"`
	Path     string  `json:"path"`
	Status   int     `json:"status"`
	Bytes    int64   `json:"bytes"`
	Duration float64 `json:"duration_ms"`
	Key      string  `json:"key,omitempty"`
	Remote   string  `json:"remote,omitempty"`
}

type ctxKey int

const keyCtx ctxKey = 1

// reqInfo travels in a request's context: the key, once authenticated.
type reqInfo struct {
	key *Key
}

// middleware wraps every request: security headers, the body limit, the
// drain, the access log.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &reqInfo{}
		r = r.WithContext(context.WithValue(r.Context(), keyCtx, info))
		sw := &statusWriter{ResponseWriter: w}
		h := sw.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		if r.Body != nil {
			r.Body = http.MaxBytesReader(sw, r.Body, s.lim.MaxBodyBytes)
		}
		// A client that stops reading a response is dropped; streams
		// move the deadline on with each write.
		_ = http.NewResponseController(w).SetWriteDeadline(start.Add(s.lim.WriteTimeout))
		switch {
		case !s.hostAllowed(r.Host):
			// DNS rebinding: a page of another site whose name now
			// resolves to this server reaches it under its own name.
			s.writeError(sw, r, errorf(http.StatusForbidden, "host_not_allowed", "Host %q is not a name this server answers to (IP addresses, localhost and the names it was given: kernel serve --allow-host NAME)", r.Host))
		case !sameOrigin(r):
			// A browser sends Origin on cross-site requests: no page of
			// another site may drive this API (CSRF), whatever it holds.
			s.writeError(sw, r, errorf(http.StatusForbidden, "cross_origin", "cross-origin requests are refused (Origin %q)", r.Header.Get("Origin")))
		case s.draining.Load() && r.URL.Path != "/healthz":
			e := errorf(http.StatusServiceUnavailable, "draining", "the server is shutting down; retry on its successor")
			e.retryAfter = 5
			s.writeError(sw, r, e)
		default:
			next.ServeHTTP(sw, r)
		}
		rec := accessRecord{
			Time: start.UTC().Format(time.RFC3339Nano), Method: r.Method, Path: r.URL.Path, Status: sw.status,
			Bytes: sw.bytes, Duration: float64(time.Since(start).Microseconds()) / 1000,
		}
		if info.key != nil {
			rec.Key = info.key.Name
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			rec.Remote = host
		}
		if b, err := json.Marshal(rec); err == nil {
			// The path may hold a credential a client put there by
			// mistake: the scrubber sees every line.
			s.cfg.AccessLog.Write(append([]byte(s.cfg.Scrub(string(b))), '\n'))
		}
	})
}

// hostAllowed reports whether a request's Host names this server: an IP
// address (a page cannot make a browser send another site's request under
// an address), localhost or a name under .localhost (browsers resolve
// them to loopback themselves), or one of Config.AllowedHosts. Any other
// name may be an attacker's whose DNS answer now points here: a DNS
// rebinding page would read the unauthenticated endpoints (and the page)
// as its own origin.
func (s *Server) hostAllowed(hostport string) bool {
	if hostport == "" {
		return true // HTTP/1.0 without Host: no browser sends that
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, a := range s.cfg.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(a, "."), host) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether a request with an Origin header comes from
// this server's own origin. Requests without Origin (curl, SDKs,
// same-origin GETs) pass.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	host := strings.TrimPrefix(strings.TrimPrefix(o, "https://"), "http://")
	return o != host && strings.EqualFold(host, r.Host)
}

// auth wraps h with the key check: no key or an unknown one is 401, a key
// without any of scopes 403.
func (s *Server) auth(h func(http.ResponseWriter, *http.Request, *Key) error, scopes ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kernel"`)
			s.writeError(w, r, errorf(http.StatusUnauthorized, "unauthorized", "an API key is required: Authorization: Bearer aks_… (kernel keys create)"))
			return
		}
		k, ok := s.cfg.Keys.Authenticate(tok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kernel", error="invalid_token"`)
			s.writeError(w, r, errorf(http.StatusUnauthorized, "unauthorized", "the API key is unknown or revoked"))
			return
		}
		if info, _ := r.Context().Value(keyCtx).(*reqInfo); info != nil {
			info.key = k
		}
		allowed := false
		for _, sc := range scopes {
			allowed = allowed || k.Has(sc)
		}
		if !allowed {
			s.writeError(w, r, errorf(http.StatusForbidden, "forbidden", "key %q lacks the scope this needs (%s)", k.Name, strings.Join(scopes, " or ")))
			return
		}
		// Under a context the key watcher cancels when the key is
		// revoked: its streams end and its ongoing requests stop.
		ctx, done := s.keyReqs.track(r.Context(), k.ID)
		defer done()
		if err := h(w, r.WithContext(ctx), k); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// bearer returns the key of "Authorization: Bearer KEY".
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// queryInt reads an integer query parameter within [min, max].
func queryInt(r *http.Request, name string, def, min, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, badField(name, "query parameter %s=%q: want an integer from %d to %d", name, v, min, max)
	}
	return n, nil
}

// jsonFields lists the JSON names of t's fields (t a struct or a pointer
// to one), and those of the structs inside it: encoding/json names an
// unknown field without saying in which object it was.
func jsonFields(t reflect.Type) []string {
	var out []string
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			out = append(out, name)
			walk(f.Type)
		}
	}
	if t != nil {
		walk(t)
	}
	return out
}
