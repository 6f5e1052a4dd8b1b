package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is a configuration problem with its place, and the one error type
// of every package that checks configuration (the CLI's config, hooks,
// subprocess plugins, MCP servers; each calls it ConfigError). The place
// is whatever is known of: the file, with the 1-based line and column; the
// entry, by Kind and Name (hook "a", plugin "git", mcp server "fs"); and
// the field, a dotted path with [i] for list items, from the root of the
// configuration ("tools.plugins[0].sha256", "hooks.rules[1].match") or,
// under an entry, from the entry ("restart.backoff"). Err is what is
// wrong; errors.Is and errors.As see through it. Why one type:
// RATIONALE.md, "One ConfigError".
type Error struct {
	File   string
	Line   int
	Column int
	Kind   string
	Name   string
	Field  string
	Err    error
	// Source is the file's line at Line, shown under the message with a
	// caret at Column, as policy errors show theirs (WithSource fills it).
	Source string
}

// Error renders "file:line:col: kind "name": field: what is wrong", leaving
// out what is not known (the kind too when there is no name), and, when
// the line's text is known, the line with a caret under the column.
func (e *Error) Error() string {
	s := e.message()
	if e.Source != "" && e.Column > 0 {
		src := strings.ReplaceAll(e.Source, "\t", " ")
		s += fmt.Sprintf("\n    %s\n    %s^", src, strings.Repeat(" ", min(e.Column-1, len(src))))
	}
	return s
}

// WithSource fills in the Source of every *Error of file in err (joined
// errors too) from data, the file's text, and returns err.
func WithSource(err error, file string, data []byte) error {
	var lines []string
	var fill func(error)
	fill = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				fill(e)
			}
			return
		}
		e, ok := err.(*Error)
		if !ok || e.File != file || e.Line <= 0 || e.Source != "" {
			return
		}
		if lines == nil {
			lines = strings.Split(string(data), "\n")
		}
		if e.Line <= len(lines) {
			e.Source = strings.TrimRight(lines[e.Line-1], "\r")
		}
	}
	if err != nil {
		fill(err)
	}
	return err
}

// message is the error's one line, without the source excerpt.
func (e *Error) message() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
		}
		b.WriteString(": ")
	}
	if e.Kind != "" && e.Name != "" {
		fmt.Fprintf(&b, "%s %q: ", e.Kind, e.Name)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error about field, its Err made as fmt.Errorf makes
// it (%w wraps). The caller sets the rest of the place it knows.
func Errorf(field, format string, a ...any) *Error {
	return &Error{Field: field, Err: fmt.Errorf(format, a...)}
}

// YAMLError turns an error of yaml.v3 (a syntax error, or the first of a
// *yaml.TypeError's) into an *Error of file, with the line yaml.v3 names
// lifted into the position.
func YAMLError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msg = strings.Join(te.Errors, "; ")
	}
	// yaml.v3 says "line N: ..."; lift the line into the position.
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if line, err := strconv.Atoi(rest[:i]); err == nil {
				return &Error{File: file, Line: line, Column: 1, Err: errors.New(strings.TrimSpace(rest[i+1:]))}
			}
		}
	}
	return &Error{File: file, Err: errors.New(msg)}
}

// A Problem is one violation a JSON Schema validator found: the JSON
// pointer of the value ("/tools/plugins/0/sha256") and what is wrong.
type Problem struct {
	Location string
	Message  string
	// Allowed, for an unknown field, are the fields the schema declares
	// there: Locate suggests the nearest (Suggest).
	Allowed []string
}

// Locate turns schema problems of the document root (a yaml.DocumentNode
// or its content) into *Error values of file with the line and column of
// the value each one is about, joined. An "additionalProperties" problem
// points at the unknown key itself and says so; schema names the schema
// file for the hint. It returns nil for no problems.
func Locate(file, schema string, root *yaml.Node, probs []Problem) error {
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	var errs []error
	for _, p := range probs {
		ptr := strings.TrimSuffix(p.Location, "/")
		msg := p.Message
		if strings.HasPrefix(msg, "additionalProperties ") {
			if f := between(msg, "'", "'"); f != "" {
				ptr += "/" + f
				if s := Suggest(f, p.Allowed); s != "" {
					msg = fmt.Sprintf("unknown field; did you mean `%s`? (see schemas/%s)", s, schema)
				} else {
					msg = "unknown field (check the spelling; see schemas/" + schema + ")"
				}
			}
		}
		e := &Error{File: file, Field: FieldName(ptr), Err: errors.New(msg)}
		if n := NodeAt(root, ptr); n != nil {
			e.Line, e.Column = n.Line, n.Column
		}
		errs = append(errs, e)
	}
	// In the file's order, as a reader goes through it.
	slices.SortStableFunc(errs, func(a, b error) int {
		ea, eb := a.(*Error), b.(*Error)
		return cmp.Or(cmp.Compare(ea.Line, eb.Line), cmp.Compare(ea.Column, eb.Column))
	})
	return errors.Join(errs...)
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i+1:], b)
	if j < 0 {
		return ""
	}
	return s[i+1 : i+1+j]
}

// NodeAt follows a JSON pointer through a YAML node as far as it goes; for
// a mapping key it returns the key node (where a person looks).
func NodeAt(n *yaml.Node, ptr string) *yaml.Node {
	if ptr == "" {
		return n
	}
	for _, part := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch n.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					next = n.Content[i+1]
					if strings.HasSuffix(ptr, "/"+part) {
						return n.Content[i]
					}
				}
			}
			if next == nil {
				return n
			}
			n = next
		case yaml.SequenceNode:
			i, err := strconv.Atoi(part)
			if err != nil || i >= len(n.Content) {
				return n
			}
			n = n.Content[i]
		default:
			return n
		}
	}
	return n
}

// FieldName renders a JSON pointer as a field: "/a/b/0/c" is "a.b[0].c".
func FieldName(ptr string) string {
	if ptr == "" {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	var b strings.Builder
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil {
			fmt.Fprintf(&b, "[%s]", p)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// KindName describes a node for "expected X, got Y" messages.
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if IsNull(n) {
			return "nothing (null)"
		}
		return "the scalar " + quoteShort(n.Value)
	}
	return "something else"
}

// IsNull reports whether n is a YAML null.
func IsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return `"` + s + `"`
}

// Instance converts a YAML document into the value a JSON Schema validator
// checks: what encoding/json decodes from the same data, numbers as
// json.Number. Errors are *Error values of file.
func Instance(file string, root *yaml.Node) (any, error) {
	var v any
	if err := root.Decode(&v); err != nil {
		return nil, YAMLError(file, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &Error{File: file, Err: fmt.Errorf("not representable as JSON: %w", err)}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var inst any
	if err := dec.Decode(&inst); err != nil {
		return nil, &Error{File: file, Err: err}
	}
	return inst, nil
}
