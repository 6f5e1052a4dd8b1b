package declared

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/tool"
)

// maxPreviewBody is the most of a request body a preview shows.
const maxPreviewBody = 16 << 10

// Preview is the request a call with args would send, built by the code
// that sends it (request), without sending it: the method, the URL, the
// headers and the body. A secret is shown as the ${env:NAME} it comes
// from, never its value. Arguments the tool would refuse make a refused
// preview carrying the error the model would read.
func (t *HTTPTool) Preview(ctx context.Context, raw json.RawMessage) (tool.Preview, error) {
	if err := ctx.Err(); err != nil {
		return tool.Preview{}, err
	}
	args, err := decodeArgs(raw)
	if err != nil {
		return tool.Preview{Summary: err.Error(), Refused: true}, nil
	}
	placeholders := make(map[string]string, len(t.secrets))
	for name := range t.secrets {
		placeholders[name] = "${env:" + name + "}"
	}
	// The same builder as Call, given placeholders for the secrets.
	shown := *t
	shown.secrets = placeholders
	req, err := shown.request(ctx, args)
	if err != nil {
		return tool.Preview{Summary: t.redact.String(err.Error()), Refused: true}, nil
	}
	u := req.URL.String()
	for _, p := range placeholders {
		u = strings.ReplaceAll(u, url.QueryEscape(p), p)
	}
	r := &tool.Request{Method: req.Method, URL: t.redact.String(u), Header: map[string][]string{}}
	keys := make([]string, 0, len(req.Header))
	for k := range req.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			r.Header[k] = append(r.Header[k], t.redact.String(v))
		}
	}
	if req.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(req.Body, maxPreviewBody+1))
		switch {
		case !utf8.Valid(b):
			r.BodyNote = "binary"
		case len(b) > maxPreviewBody:
			r.Body, r.BodyNote = t.redact.String(string(b[:maxPreviewBody])), "cut at 16 KiB"
		default:
			r.Body = t.redact.String(string(b))
		}
	}
	return tool.Preview{Summary: req.Method + " " + r.URL, Request: r}, nil
}

var _ tool.Previewer = (*HTTPTool)(nil)
