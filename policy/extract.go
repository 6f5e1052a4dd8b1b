package policy

import (
	"encoding/json"
	"sort"
	"strings"
)

// argKind says what a tool argument holds, for call.paths, call.argv and
// call.command.
type argKind uint8

const (
	argPath    argKind = iota + 1 // a string path → call.paths
	argPaths                      // an array of string paths → call.paths
	argArgv                       // an array of strings → call.argv, call.command
	argCommand                    // a command line string → call.command
)

// xPolicyKinds are the values of the "x-policy" annotation on an argument's
// schema.
var xPolicyKinds = map[string]argKind{"path": argPath, "paths": argPaths, "argv": argArgv, "command": argCommand}

// conventionKinds are the argument names recognised without an annotation.
var conventionKinds = map[string]argKind{"path": argPath, "paths": argPaths, "argv": argArgv, "command": argCommand}

type argField struct {
	name string
	kind argKind
}

// extractor knows which top-level arguments of one tool are paths or a
// command. It is built once per tool from the tool's JSON Schema: a
// property annotated "x-policy": "path" | "paths" | "argv" | "command" has
// that kind; "x-policy": "none" opts a conventionally named property out;
// otherwise the properties named path, paths, argv and command have the
// kind of their name. A tool without schema properties uses the naming
// convention on the arguments themselves.
type extractor struct {
	schema []byte // the schema this was built from
	fields []argField
	byName bool // no schema properties: apply the convention to the args
}

func newExtractor(schema []byte) *extractor {
	ex := &extractor{schema: schema}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		ex.byName = true
		return ex
	}
	for name, raw := range s.Properties {
		var p struct {
			XPolicy string `json:"x-policy"`
		}
		_ = json.Unmarshal(raw, &p) // a property that is not an object has no annotation
		kind, annotated := xPolicyKinds[p.XPolicy]
		if !annotated {
			if p.XPolicy == "none" {
				continue
			}
			kind = conventionKinds[name]
		}
		if kind != 0 {
			ex.fields = append(ex.fields, argField{name, kind})
		}
	}
	// Map iteration order is random; paths must come out in a stable order.
	sort.Slice(ex.fields, func(i, j int) bool { return ex.fields[i].name < ex.fields[j].name })
	return ex
}

func (ex *extractor) extract(args map[string]any, c *CallEnv) {
	if ex.byName {
		for _, name := range []string{"argv", "command", "path", "paths"} {
			if v, ok := args[name]; ok {
				apply(conventionKinds[name], v, c)
			}
		}
	} else {
		for _, f := range ex.fields {
			if v, ok := args[f.name]; ok {
				apply(f.kind, v, c)
			}
		}
	}
	if c.Command == "" && len(c.Argv) > 0 {
		c.Command = strings.Join(c.Argv, " ")
	}
}

func apply(kind argKind, v any, c *CallEnv) {
	switch kind {
	case argPath:
		if s, ok := v.(string); ok && s != "" {
			c.Paths = append(c.Paths, cleanPath(s))
		}
	case argPaths:
		for _, s := range strings1(v) {
			if s != "" {
				c.Paths = append(c.Paths, cleanPath(s))
			}
		}
	case argArgv:
		c.Argv = append(c.Argv, strings1(v)...)
	case argCommand:
		if s, ok := v.(string); ok {
			if c.Command != "" {
				c.Command += " "
			}
			c.Command += s
		}
	}
}

// strings1 returns the elements of a JSON array as strings (an element
// that is not a string appears as its JSON text, so nothing disappears from
// a command line), or the value itself when it is a single string.
func strings1(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			} else if b, err := json.Marshal(e); err == nil {
				out = append(out, string(b))
			}
		}
		return out
	case []string:
		return v
	}
	return nil
}
