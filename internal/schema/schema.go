// Package schema is the project's one JSON Schema set-up: every schema the
// kernel compiles (tool argument schemas, the embedded config, policy, hook,
// tool-manifest and event schemas) goes through the same compiler settings,
// the same loader and the same error rendering.
//
// The settings: draft 2020-12 unless a schema's $schema says otherwise;
// "format" is asserted ("date-time", "email", "uri", ...: a value that does
// not match its format is a violation; jsonschema/v5 does this for a schema
// without a $schema vocabulary, and every set-up did it before there was
// one); every $ref must resolve inside the schema itself: remote and file
// loads are refused, so compiling never touches the network or the disk.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentkernel/agentkernel/schemas"
)

// Schema is a compiled JSON Schema. It is safe for concurrent use.
type Schema struct {
	s *jsonschema.Schema
	// doc is the schema document as JSON decodes it, for the property
	// names a Problem lists (Problem.Allowed); nil when not kept.
	doc any
	// flat, when the schema has its shape, says yes to valid values
	// without the general validator (flat.go).
	flat *flat
}

// Validate checks v, a value as encoding/json decodes it (map[string]any,
// []any, string, float64 or json.Number, bool, nil). A violation is a
// *ValidationError listing every failing location.
func (s *Schema) Validate(v any) error {
	if s.flat != nil && s.flat.valid(v) {
		return nil
	}
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err // e.g. an unsupported Go type in v
	}
	return &ValidationError{Problems: leaves(ve, s.doc)}
}

// ValidateJSON decodes data (numbers kept exact) and validates it. Data
// that is not one JSON value is an error naming where it breaks.
func (s *Schema) ValidateJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not valid JSON: trailing data after the value")
	}
	return s.Validate(v)
}

// Problem is one leaf of a violation: where in the instance (a JSON
// pointer, "/" for the root) and what is wrong.
type Problem struct {
	Location string
	Message  string
	// Allowed, for a property the schema does not allow
	// (additionalProperties), lists the properties the schema at that
	// place declares, sorted: what a misspelt name may have meant.
	Allowed []string
}

func (p Problem) String() string { return p.Location + ": " + p.Message }

// ValidationError is a value that does not match its schema. Problems are
// the leaves of the violation, the causes that say what is actually wrong,
// in order and without repeats.
type ValidationError struct {
	Problems []Problem
}

// Error renders the problems as "location: message" parts joined by "; ".
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// Problems returns the problems of the *ValidationError in err's chain, or
// nil if there is none.
func Problems(err error) []Problem {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	return ve.Problems
}

func leaves(ve *jsonschema.ValidationError, doc any) []Problem {
	var out []Problem
	var walk func(*jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			loc := v.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			p := Problem{Location: loc, Message: strings.Replace(v.Message, ", but got ", ", got ", 1)}
			if strings.HasPrefix(v.Message, "additionalProperties ") {
				p.Allowed = declaredProperties(doc, v.AbsoluteKeywordLocation)
			}
			out = append(out, p)
			return
		}
		for _, c := range v.Causes {
			walk(c)
		}
	}
	walk(ve)
	return slices.CompactFunc(out, func(a, b Problem) bool { return a.Location == b.Location && a.Message == b.Message })
}

// declaredProperties returns the "properties" names of the schema object
// that holds the keyword at loc ("mem:///x.json#/properties/model/additionalProperties"),
// sorted; nil when doc is nil or loc leads nowhere. Every $ref resolves
// inside the document (see the package comment), so the fragment is a
// pointer into doc.
func declaredProperties(doc any, loc string) []string {
	_, frag, ok := strings.Cut(loc, "#")
	if !ok || doc == nil {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	if len(parts) == 0 || parts[len(parts)-1] != "additionalProperties" {
		return nil
	}
	n := doc
	for _, p := range parts[:len(parts)-1] {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		switch v := n.(type) {
		case map[string]any:
			n = v[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			n = v[i]
		default:
			return nil
		}
	}
	obj, _ := n.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	if len(props) == 0 {
		return nil
	}
	out := make([]string, 0, len(props))
	for k := range props {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// newCompiler is the one compiler set-up.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("remote $ref %q is not allowed: a schema must be self-contained", u)
	}
	return c
}

func compile(c *jsonschema.Compiler, url string, data []byte) (*Schema, error) {
	if err := c.AddResource(url, bytes.NewReader(data)); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	doc := decodeDoc(data)
	return &Schema{s: s, doc: doc, flat: newFlat(doc)}, nil
}

// decodeDoc is the schema document for declaredProperties (nil if it does
// not decode, which Compile has already refused).
func decodeDoc(data []byte) any {
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return nil
	}
	return doc
}

// CompileTool compiles a tool's argument schema. It must be a JSON object
// whose "type", if present, is "object" (tool arguments are a JSON object).
// name only labels the schema in errors.
func CompileTool(name string, data []byte) (*Schema, error) {
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("schema is not a JSON object: %w", err)
	}
	if t, ok := top["type"]; ok && t != "object" {
		return nil, fmt.Errorf("schema type must be \"object\" (tool arguments are a JSON object), got %v", t)
	}
	s, err := compile(newCompiler(), "mem:///tools/"+name+".json", data)
	if err != nil {
		return nil, fmt.Errorf("invalid schema: %w", err)
	}
	return s, nil
}

// Compile compiles a document schema. name only labels the schema in
// errors.
func Compile(name string, data []byte) (*Schema, error) {
	s, err := compile(newCompiler(), "mem:///"+name, data)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return s, nil
}

var embedded sync.Map // file name -> func() (*Schema, error)

// Embedded returns the compiled schemas/<file> (e.g. "config.schema.json"),
// compiled once per process.
func Embedded(file string) (*Schema, error) {
	f, ok := embedded.Load(file)
	if !ok {
		f, _ = embedded.LoadOrStore(file, sync.OnceValues(func() (*Schema, error) {
			data, err := schemas.FS.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("schemas/%s: %w", file, err)
			}
			s, err := compile(newCompiler(), "mem:///schemas/"+file, data)
			if err != nil {
				return nil, fmt.Errorf("schemas/%s: %w", file, err)
			}
			return s, nil
		}))
	}
	return f.(func() (*Schema, error))()
}

// MustEmbedded is Embedded for schemas the binary cannot run without; a
// failure (a broken embedded file, caught by the tests) panics.
func MustEmbedded(file string) *Schema {
	s, err := Embedded(file)
	if err != nil {
		panic(err)
	}
	return s
}

// CompileRefs compiles the schemas at the JSON pointers refs ("#/a/b") of
// one document, resolving $refs inside it: the response schemas of an
// OpenAPI 3.1 document, say. name labels the document in errors.
func CompileRefs(name string, data []byte, refs []string) (map[string]*Schema, error) {
	c := newCompiler()
	url := "mem:///" + name
	if err := c.AddResource(url, bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	out := make(map[string]*Schema, len(refs))
	doc := decodeDoc(data)
	for _, ref := range refs {
		s, err := c.Compile(url + ref)
		if err != nil {
			return nil, fmt.Errorf("schema %s%s: %w", name, ref, err)
		}
		out[ref] = &Schema{s: s, doc: doc}
	}
	return out, nil
}
