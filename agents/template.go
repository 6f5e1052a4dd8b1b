package agents

import (
	"fmt"
	"strings"
)

// Template is a pipeline step's input (or a pipeline's output): text with
// references to the run's input, {{input}}, and to an earlier step's
// output, {{steps.NAME.output}}. Nothing else is expanded: the text is
// data, never code.
type Template struct {
	src   string
	parts []part
}

type part struct {
	lit string
	// ref is "" for a literal, inputRef for {{input}}, else a step name.
	ref string
}

const inputRef = "\x00input"

// ParseTemplate parses s. A "{{" that does not open one of the two
// references is an error naming it.
func ParseTemplate(s string) (*Template, error) {
	t := &Template{src: s}
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if rest != "" {
				t.parts = append(t.parts, part{lit: rest})
			}
			return t, nil
		}
		if i > 0 {
			t.parts = append(t.parts, part{lit: rest[:i]})
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("%q opens {{ and never closes it", clip(rest[i:]))
		}
		expr := strings.TrimSpace(rest[i+2 : i+j])
		switch name, ok := stepRef(expr); {
		case expr == "input":
			t.parts = append(t.parts, part{ref: inputRef})
		case ok:
			t.parts = append(t.parts, part{ref: name})
		default:
			return nil, fmt.Errorf("{{%s}} is not a reference: write {{input}} (the run's input) or {{steps.NAME.output}} (an earlier step's output)", expr)
		}
		rest = rest[i+j+2:]
	}
}

// stepRef reads "steps.NAME.output".
func stepRef(expr string) (string, bool) {
	name, ok := strings.CutPrefix(expr, "steps.")
	if !ok {
		return "", false
	}
	name, ok = strings.CutSuffix(name, ".output")
	if !ok || name == "" || strings.ContainsAny(name, ". \t{}") {
		return "", false
	}
	return name, true
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Steps returns the steps t reads, in order, each once.
func (t *Template) Steps() []string {
	var out []string
	for _, p := range t.parts {
		if p.ref != "" && p.ref != inputRef && !contains(out, p.ref) {
			out = append(out, p.ref)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Render expands t with the run's input and the steps' outputs.
func (t *Template) Render(input string, outputs map[string]string) string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.ref {
		case "":
			b.WriteString(p.lit)
		case inputRef:
			b.WriteString(input)
		default:
			b.WriteString(outputs[p.ref])
		}
	}
	return b.String()
}

// String is the template as written.
func (t *Template) String() string { return t.src }
