package declared

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/itchyny/gojq"
	"golang.org/x/text/encoding/htmlindex"

	"github.com/agentkernel/agentkernel/tool"
)

// maxErrorBody is how much of an error answer's body the model reads.
const maxErrorBody = 2 << 10

// maxJQResults bounds the results of the jq extraction.
const maxJQResults = 10_000

// answer turns a response into the call's result: a 2xx answer is the
// result (after jq); any other status is a tool error with a code the
// model and policy can read, and the start of the body.
func (t *HTTPTool) answer(ctx context.Context, resp *http.Response) (tool.Result, error) {
	body, err := t.read(ctx, resp)
	status := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("%s %s: %s", t.method, t.url.base.Host, status)
		if err == nil && len(strings.TrimSpace(body)) > 0 {
			msg += "\n" + cut(body, maxErrorBody)
		}
		return tool.Result{}, tool.Errorf(statusCode(resp.StatusCode), "%s", msg)
	}
	if err != nil {
		return tool.Result{}, err
	}
	if resp.Request.Method == http.MethodHead || len(body) == 0 {
		return tool.Result{Content: status + " (no body)"}, nil
	}
	if t.jq != nil {
		if body, err = t.extract(ctx, body); err != nil {
			return tool.Result{}, err
		}
	}
	return tool.Result{Content: cut(body, t.maxOut)}, nil
}

// statusCode maps an HTTP status to a tool error code.
func statusCode(status int) string {
	switch {
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity:
		return tool.CodeInvalidArgs
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return tool.CodePermissionDenied
	case status == http.StatusNotFound, status == http.StatusGone:
		return tool.CodeNotFound
	case status == http.StatusRequestTimeout, status == http.StatusGatewayTimeout:
		return tool.CodeTimeout
	case status == http.StatusTooManyRequests, status >= 500:
		return tool.CodeUnavailable
	}
	return tool.CodeToolError
}

// read reads the body: its content type must be accepted, its size at most
// maxBody (a longer answer is an error: a cut JSON document would mislead),
// its text decoded from its charset, and invalid UTF-8 replaced.
func (t *HTTPTool) read(ctx context.Context, resp *http.Response) (string, error) {
	ct := resp.Header.Get("Content-Type")
	media, params, perr := mime.ParseMediaType(ct)
	if ct != "" && perr == nil && !accepts(t.accepted, media) && resp.ContentLength != 0 {
		return "", tool.Errorf(tool.CodeToolError, "%s %s answered %s, which this tool does not accept (response.content_types: %s)",
			t.method, t.url.base.Host, media, strings.Join(t.accepted, ", "))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.maxBody)+1))
	if err != nil {
		if ctx.Err() != nil {
			return "", tool.Errorf(tool.CodeTimeout, "%s %s: the answer did not finish within %s", t.method, t.url.base.Host, t.timeout)
		}
		return "", tool.Errorf(tool.CodeUnavailable, "%s %s: reading the answer: %v", t.method, t.url.base.Host, err)
	}
	if len(b) > t.maxBody {
		return "", tool.Errorf(tool.CodeToolError, "%s %s: the answer is longer than %d bytes (response.max_bytes); it was not read further",
			t.method, t.url.base.Host, t.maxBody)
	}
	if cs := strings.ToLower(params["charset"]); cs != "" && cs != "utf-8" && cs != "utf8" && cs != "us-ascii" {
		if enc, err := htmlindex.Get(cs); err == nil {
			if d, err := enc.NewDecoder().Bytes(b); err == nil {
				b = d
			}
		}
	}
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return string(b), nil
}

// accepts reports whether media matches one of the patterns (type/subtype,
// with * for either part or a suffix: application/*+json).
func accepts(patterns []string, media string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), media); ok {
			return true
		}
	}
	return false
}

// extract runs the tool's jq program on a JSON body: each result is one
// line of JSON (a string result is its text).
func (t *HTTPTool) extract(ctx context.Context, body string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", tool.Errorf(tool.CodeToolError, "%s %s: response.jq needs a JSON answer: %v", t.method, t.url.base.Host, err)
	}
	v = normalizeNumbers(v)
	var b strings.Builder
	iter := t.jq.RunWithContext(ctx, v)
	for n := 0; ; n++ {
		r, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := r.(error); isErr {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break
			}
			return "", tool.Errorf(tool.CodeToolError, "response.jq: %v", err)
		}
		if n >= maxJQResults || b.Len() > t.maxBody {
			b.WriteString("[... more results left out]\n")
			break
		}
		if s, isStr := r.(string); isStr {
			b.WriteString(s)
		} else {
			out, err := gojq.Marshal(r)
			if err != nil {
				return "", tool.Errorf(tool.CodeToolError, "response.jq: %v", err)
			}
			b.Write(out)
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// normalizeNumbers turns json.Number into the int or float64 gojq takes.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.Atoi(x.String()); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	}
	return v
}

// cut keeps the first max bytes of s (on a rune boundary), with a marker
// saying how much was left out.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("\n[... %d more bytes left out: max_output_bytes is %d]", len(s)-i, max)
}
