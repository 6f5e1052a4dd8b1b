package declared

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/tool"
)

// A template is text with {name} placeholders for arguments and
// ${env:NAME} references to the kernel's environment (secrets); {{ and }}
// are literal braces. Every value is rendered for its position (escaped in
// a URL path or query, one argv entry, a JSON value), never pasted into a
// string that is parsed again.
type template []part

// part is one piece of a template: literal text, an argument, or a secret.
type part struct {
	lit    string
	arg    string
	secret string // the variable's name
}

// parseTemplate parses s.
func parseTemplate(s string) (template, error) {
	var t template
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t = append(t, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.HasPrefix(s[i:], "${env:"):
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: ${env: is not closed with }", s)
			}
			name := s[i+len("${env:") : i+end]
			if !validEnvName(name) {
				return nil, fmt.Errorf("%q: %q is not an environment variable name in ${env:NAME}", s, name)
			}
			flush()
			t = append(t, part{secret: name})
			i += end
		case strings.HasPrefix(s[i:], "{{"), strings.HasPrefix(s[i:], "}}"):
			lit.WriteByte(c)
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: { is not closed with } (write {{ for a literal brace)", s)
			}
			name := s[i+1 : i+end]
			if name == "" || strings.ContainsAny(name, "{ \t\n") {
				return nil, fmt.Errorf("%q: {%s} is not an argument placeholder (write {{ for a literal brace)", s, name)
			}
			flush()
			t = append(t, part{arg: name})
			i += end
		case c == '}':
			return nil, fmt.Errorf("%q: a } without its { (write }} for a literal brace)", s)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

func validEnvName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return s != ""
}

// args lists the arguments the template names.
func (t template) args() []string {
	var out []string
	for _, p := range t {
		if p.arg != "" && !slices.Contains(out, p.arg) {
			out = append(out, p.arg)
		}
	}
	return out
}

// secrets lists the variables the template names.
func (t template) secrets() []string {
	var out []string
	for _, p := range t {
		if p.secret != "" {
			out = append(out, p.secret)
		}
	}
	return out
}

// single returns the argument a template made of one placeholder and
// nothing else names.
func (t template) single() (string, bool) {
	if len(t) == 1 && t[0].arg != "" {
		return t[0].arg, true
	}
	return "", false
}

// literal reports whether the template has no placeholder and no secret.
func (t template) literal() bool { return len(t.args()) == 0 && len(t.secrets()) == 0 }

// errAbsent is an argument the call did not give.
var errAbsent = errors.New("absent")

// render renders t with each argument's text (text) and each secret's value.
// An absent argument is errAbsent: the caller leaves out what the template
// stands for (a query pair, a header, an argv entry).
func (t template) render(args map[string]any, secrets map[string]string, esc func(string) string) (string, error) {
	var b strings.Builder
	for _, p := range t {
		switch {
		case p.arg != "":
			v, ok := args[p.arg]
			if !ok {
				return "", errAbsent
			}
			s, err := text(p.arg, v)
			if err != nil {
				return "", err
			}
			if esc != nil {
				s = esc(s)
			}
			b.WriteString(s)
		case p.secret != "":
			s := secrets[p.secret]
			if esc != nil {
				s = esc(s)
			}
			b.WriteString(s)
		default:
			b.WriteString(p.lit)
		}
	}
	return b.String(), nil
}

// text is an argument's value as text: a string as it is, a number as
// JSON writes it, true or false, "" for null, an array or object as
// compact JSON.
func text(name string, v any) (string, error) {
	switch v := v.(type) {
	case string:
		if strings.ContainsRune(v, 0) {
			return "", tool.Errorf(tool.CodeInvalidArgs, "%s contains a NUL byte", name)
		}
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		if v {
			return "true", nil
		}
		return "false", nil
	case nil:
		return "", nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", tool.Errorf(tool.CodeInvalidArgs, "%s: %v", name, err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// decodeArgs decodes a call's arguments (already validated against the
// schema) keeping numbers exact.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	m := map[string]any{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return m, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, tool.Errorf(tool.CodeInvalidArgs, "arguments: %v", err)
	}
	return m, nil
}

// valueTemplate is a structured template (a request body, an inline
// answer): a JSON value whose strings are templates. A string that is one
// placeholder and nothing else becomes the argument's own JSON value
// (a number stays a number, an object an object); any other string is a
// string. The value is built as data and encoded once: an argument can
// never add structure to it.
type valueTemplate struct {
	v any // map[string]any, []any, template, or a JSON scalar
}

func parseValueTemplate(v any) (valueTemplate, error) {
	var conv func(v any, at string) (any, error)
	conv = func(v any, at string) (any, error) {
		switch v := v.(type) {
		case string:
			t, err := parseTemplate(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			return t, nil
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, x := range v {
				c, err := conv(x, at+"."+k)
				if err != nil {
					return nil, err
				}
				out[k] = c
			}
			return out, nil
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				c, err := conv(x, fmt.Sprintf("%s[%d]", at, i))
				if err != nil {
					return nil, err
				}
				out[i] = c
			}
			return out, nil
		}
		return v, nil
	}
	c, err := conv(v, "body")
	return valueTemplate{v: c}, err
}

// walk calls fn for every string template.
func (vt valueTemplate) walk(fn func(template)) {
	var w func(v any)
	w = func(v any) {
		switch v := v.(type) {
		case template:
			fn(v)
		case map[string]any:
			for _, x := range v {
				w(x)
			}
		case []any:
			for _, x := range v {
				w(x)
			}
		}
	}
	w(vt.v)
}

// build renders the value: a field whose placeholder's argument is absent
// is left out of its object (null in an array).
func (vt valueTemplate) build(args map[string]any, secrets map[string]string) (any, error) {
	var b func(v any) (any, bool, error)
	b = func(v any) (any, bool, error) {
		switch v := v.(type) {
		case template:
			if name, ok := v.single(); ok {
				x, ok := args[name]
				return x, ok, nil
			}
			s, err := v.render(args, secrets, nil)
			if errors.Is(err, errAbsent) {
				return nil, false, nil
			}
			return s, err == nil, err
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, x := range v {
				c, ok, err := b(x)
				if err != nil {
					return nil, false, err
				}
				if ok {
					out[k] = c
				}
			}
			return out, true, nil
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				c, _, err := b(x)
				if err != nil {
					return nil, false, err
				}
				out[i] = c
			}
			return out, true, nil
		}
		return v, true, nil
	}
	out, _, err := b(vt.v)
	return out, err
}
