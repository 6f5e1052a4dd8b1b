package declared

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentkernel/agentkernel/tool"
)

// urlTemplate is an HTTP tool's URL: a fixed scheme and host, a path and a
// query with placeholders. A path value is escaped as one path segment
// ("a/../b" stays one segment, %2F for its slashes); a query value as one
// query value. A query pair whose value is one placeholder is left out
// when the argument is absent, and repeated for an array.
type urlTemplate struct {
	base  url.URL // scheme and host
	path  template
	query []queryPair
}

type queryPair struct {
	key string
	val template
}

func parseURLTemplate(s string) (urlTemplate, error) {
	var u urlTemplate
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme != "http" && scheme != "https" {
		return u, fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	if strings.Contains(rest, "#") {
		return u, fmt.Errorf("%q: a URL sent to a server has no #fragment", s)
	}
	hostEnd := strings.IndexAny(rest, "/?")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	host := rest[:hostEnd]
	if host == "" || strings.ContainsAny(host, "{}$@") {
		return u, fmt.Errorf("%q: the host must be written out (no placeholder, secret or user@): the tool's egress is checked against it", s)
	}
	check, err := url.Parse(scheme + "://" + host)
	if err != nil || check.Host != host || check.Hostname() == "" {
		return u, fmt.Errorf("%q: %q is not a host", s, host)
	}
	u.base = url.URL{Scheme: scheme, Host: host}
	rest = rest[hostEnd:]
	pathPart, queryPart, _ := strings.Cut(rest, "?")
	if pathPart == "" {
		pathPart = "/"
	}
	if u.path, err = parseTemplate(pathPart); err != nil {
		return u, err
	}
	if len(u.path.secrets()) > 0 {
		return u, fmt.Errorf("%q: a secret (${env:...}) cannot be in the path: put it in a header, the query or the body", s)
	}
	for _, p := range u.path {
		if p.lit != "" {
			if _, err := url.ParseRequestURI("/" + strings.TrimPrefix(p.lit, "/")); err != nil {
				return u, fmt.Errorf("%q: the path %q is not valid: %v", s, p.lit, err)
			}
		}
	}
	if queryPart == "" {
		return u, nil
	}
	for _, kv := range strings.Split(queryPart, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if k == "" || strings.ContainsAny(k, "{}$") {
			return u, fmt.Errorf("%q: the query key %q must be written out", s, k)
		}
		t, err := parseTemplate(v)
		if err != nil {
			return u, err
		}
		u.query = append(u.query, queryPair{key: k, val: t})
	}
	return u, nil
}

// args lists the arguments of the path and the query.
func (u urlTemplate) args() (path, query []string) {
	path = u.path.args()
	for _, q := range u.query {
		query = append(query, q.val.args()...)
	}
	return path, query
}

// secrets lists the variables the query names.
func (u urlTemplate) secrets() []string {
	var out []string
	for _, q := range u.query {
		out = append(out, q.val.secrets()...)
	}
	return out
}

// render builds the URL for a call.
func (u urlTemplate) render(args map[string]any, secrets map[string]string) (*url.URL, error) {
	out := u.base
	var raw strings.Builder
	for _, p := range u.path {
		if p.arg == "" {
			raw.WriteString(p.lit)
			continue
		}
		v, ok := args[p.arg]
		if !ok {
			return nil, tool.Errorf(tool.CodeInvalidArgs, "%s is required: it is part of the URL's path", p.arg)
		}
		seg, err := pathValue(p.arg, v)
		if err != nil {
			return nil, err
		}
		raw.WriteString(seg)
	}
	out.RawPath = raw.String()
	path, err := url.PathUnescape(out.RawPath)
	if err != nil {
		return nil, tool.Errorf(tool.CodeInvalidArgs, "the URL's path: %v", err)
	}
	out.Path = path
	var q []string
	for _, p := range u.query {
		if name, ok := p.val.single(); ok {
			v, present := args[name]
			if !present {
				continue
			}
			if list, isList := v.([]any); isList {
				for _, item := range list {
					s, err := text(name, item)
					if err != nil {
						return nil, err
					}
					q = append(q, p.key+"="+url.QueryEscape(s))
				}
				continue
			}
		}
		s, err := p.val.render(args, secrets, url.QueryEscape)
		if errors.Is(err, errAbsent) {
			continue
		}
		if err != nil {
			return nil, err
		}
		q = append(q, p.key+"="+s)
	}
	out.RawQuery = strings.Join(q, "&")
	return &out, nil
}

// pathValue is one placeholder's value escaped as (part of) a path
// segment: an array is its items joined by commas (OpenAPI's "simple"
// style); "." and ".." are refused, as a server would read them as
// directories.
func pathValue(name string, v any) (string, error) {
	switch v := v.(type) {
	case map[string]any:
		return "", tool.Errorf(tool.CodeInvalidArgs, "%s is an object; a URL path takes a string, a number or a list", name)
	case []any:
		parts := make([]string, len(v))
		for i, item := range v {
			s, err := pathValue(name, item)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	s, err := text(name, v)
	if err != nil {
		return "", err
	}
	if s == "." || s == ".." || s == "" {
		return "", tool.Errorf(tool.CodeInvalidArgs, "%s is %q, which cannot be a segment of the URL's path", name, s)
	}
	return url.PathEscape(s), nil
}
