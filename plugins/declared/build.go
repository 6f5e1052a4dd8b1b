package declared

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/config/names"
	"github.com/agentkernel/agentkernel/kernel"
)

// The ToolSpec.Source of declared tools: "http", "command", "inline", and
// "openapi:<document>" for HTTP tools imported from an OpenAPI document.
const (
	SourceHTTP    = "http"
	SourceCommand = "command"
	SourceInline  = "inline"
	SourceOpenAPI = "openapi:"
)

// Set is the declared tools built from one configuration, by source.
type Set struct {
	// Tools are the tools of each source (Sources lists them in order).
	Tools map[string][]kernel.Tool
	// Secrets are the values of the ${env:...} references the tools
	// resolved: the kernel redacts them everywhere (hooks.KnownSecrets).
	Secrets []string
	// Notices are what the operator must be told at every start (TLS
	// verification turned off).
	Notices []string
	http    []*HTTPTool
}

// Sources lists the sources of s's tools, sorted.
func (s *Set) Sources() []string {
	out := make([]string, 0, len(s.Tools))
	for k := range s.Tools {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Len is the number of tools.
func (s *Set) Len() int {
	n := 0
	for _, ts := range s.Tools {
		n += len(ts)
	}
	return n
}

// Close releases the tools' connections. Calls after Close still work
// (they dial again).
func (s *Set) Close() {
	for _, t := range s.http {
		t.Close()
	}
}

// Build builds every tool of c. The first problem is returned, a
// *config.Error naming the file, the entry's line, the tool and the field;
// nothing of c is built then.
func Build(c Config, o Options) (*Set, error) {
	s := &Set{Tools: map[string][]kernel.Tool{}}
	seen := map[string]string{}
	add := func(kind, name string, at config.Pos, build func() (kernel.Tool, []string, error)) error {
		if err := names.ToolName.Check(name); err != nil {
			return entryError(o.File, kind, name, at, "name", err)
		}
		if prev, dup := seen[name]; dup {
			return entryError(o.File, kind, name, at, "name", fmt.Errorf("%q is also the name of a %s tool: names must be unique", name, prev))
		}
		seen[name] = kind
		t, notes, err := build()
		if err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return entryError(o.File, kind, name, at, fe.field, fe.err)
			}
			return entryError(o.File, kind, name, at, "", err)
		}
		src := t.Spec().Source
		s.Tools[src] = append(s.Tools[src], t)
		s.Notices = append(s.Notices, notes...)
		return nil
	}
	for _, h := range c.HTTP {
		err := add("http", h.Name, h.At, func() (kernel.Tool, []string, error) {
			if strings.TrimSpace(h.Description) == "" {
				return nil, nil, fieldErr("description", "is empty: the model reads it to know when to call the tool")
			}
			t, notes, err := newHTTP(h, o)
			if err != nil {
				return nil, nil, err
			}
			s.http = append(s.http, t)
			for _, v := range t.secrets {
				s.Secrets = append(s.Secrets, v)
			}
			return t, notes, nil
		})
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, cc := range c.Command {
		err := add("command", cc.Name, cc.At, func() (kernel.Tool, []string, error) {
			if strings.TrimSpace(cc.Description) == "" {
				return nil, nil, fieldErr("description", "is empty: the model reads it to know when to call the tool")
			}
			t, err := newCommand(cc, o)
			return t, nil, err
		})
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, ic := range c.Inline {
		err := add("inline", ic.Name, ic.At, func() (kernel.Tool, []string, error) {
			if strings.TrimSpace(ic.Description) == "" {
				return nil, nil, fieldErr("description", "is empty: the model reads it to know when to call the tool")
			}
			t, err := newInline(ic)
			return t, nil, err
		})
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	slices.Sort(s.Secrets)
	s.Secrets = slices.Compact(s.Secrets)
	return s, nil
}

// fieldError is a problem with one field of a tool's entry.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func fieldErr(field, format string, a ...any) error {
	return &fieldError{field: field, err: fmt.Errorf(format, a...)}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func validHeaderName(s string) bool { return httpguts.ValidHeaderFieldName(s) }

// Granted says, for `kernel tools`, where an HTTP tool may connect.
func (t *HTTPTool) Granted() string { return t.granted }

// Granted says, for `kernel tools`, the sandbox a command tool runs in.
func (t *CommandTool) Granted() string { return "sandbox: " + t.run.Grant.Describe() }
