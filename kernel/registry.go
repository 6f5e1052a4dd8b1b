package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agentkernel/agentkernel/internal/config/names"
	"github.com/agentkernel/agentkernel/internal/schema"
)

// Registry holds the tools a kernel can call, each with its compiled
// argument schema. It is safe for concurrent use: Register and Sync (tool
// sources whose tool lists change at run time, such as MCP servers) may run
// while the kernel reads it; the loop takes a fresh view of the tools before
// every generation.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]*entry
	order  []*entry
	// specs caches Specs for the loop; rebuilt on every change, never
	// modified in place.
	specs []ToolSpec
}

type entry struct {
	tool   Tool
	spec   ToolSpec
	schema Schema
}

var defaultSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]*entry{}} }

// Register adds tools. Each tool's spec is checked (name, tier) and its
// schema compiled; a failure is a *RegistrationError naming the tool, and
// nothing from that call is registered. A name already taken is an error
// wrapping ErrDuplicateTool.
func (r *Registry) Register(tools ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	added := make([]*entry, 0, len(tools))
	seen := map[string]bool{}
	for _, t := range tools {
		e, err := compileTool(t)
		if err != nil {
			return err
		}
		if _, dup := r.byName[e.spec.Name]; dup || seen[e.spec.Name] {
			return &RegistrationError{Tool: e.spec.Name, Err: ErrDuplicateTool}
		}
		seen[e.spec.Name] = true
		added = append(added, e)
	}
	for _, e := range added {
		r.byName[e.spec.Name] = e
		r.order = append(r.order, e)
	}
	r.specs = nil
	return nil
}

func compileTool(t Tool) (*entry, error) {
	spec := t.Spec()
	if !names.ToolName.Valid(spec.Name) {
		return nil, &RegistrationError{Tool: spec.Name, Err: errors.New("name must be " + names.ToolName.Desc())}
	}
	if !spec.Tier.Valid() {
		return nil, &RegistrationError{Tool: spec.Name, Err: fmt.Errorf("tier %q is not one of read_only, side_effecting, privileged", spec.Tier)}
	}
	if len(bytes.TrimSpace(spec.Schema)) == 0 {
		spec.Schema = defaultSchema
	}
	s, err := CompileSchema(spec.Name, spec.Schema)
	if err != nil {
		return nil, &RegistrationError{Tool: spec.Name, Err: err}
	}
	return &entry{tool: t, spec: spec, schema: s}, nil
}

// Schema is a compiled JSON Schema.
type Schema interface {
	// Validate checks v, a value as encoding/json decodes it. A violation
	// is an error that names every failing location.
	Validate(v any) error
}

// CompileSchema compiles a tool's argument schema (draft 2020-12 unless the
// schema says otherwise). It must be an object schema, and self-contained:
// remote $refs are refused. name only labels the schema in errors.
func CompileSchema(name string, s json.RawMessage) (Schema, error) {
	return schema.CompileTool(name, s)
}

// Lookup returns the named tool.
func (r *Registry) Lookup(name string) (Tool, bool) {
	e, ok := r.entry(name)
	if !ok {
		return nil, false
	}
	return e.tool, true
}

// Spec returns the named tool's spec, with its schema defaulted.
func (r *Registry) Spec(name string) (ToolSpec, bool) {
	e, ok := r.entry(name)
	if !ok {
		return ToolSpec{}, false
	}
	return e.spec, true
}

// Specs returns every tool's spec in registration order. The slice is the
// caller's.
func (r *Registry) Specs() []ToolSpec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]ToolSpec, len(r.order))
	for i, e := range r.order {
		out[i] = e.spec
	}
	return out
}

// Len is the number of tools.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.order)
}

// Names returns the tool names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, len(r.order))
	for i, e := range r.order {
		out[i] = e.spec.Name
	}
	return out
}

// Validate decodes args (a JSON object) and validates them against the named
// tool's schema. Errors wrap ErrUnknownTool or ErrInvalidArgs; a schema
// violation lists every failing path, e.g. "/count: expected integer, got
// string".
func (r *Registry) Validate(name string, args json.RawMessage) (map[string]any, error) {
	e, ok := r.entry(name)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	return e.validate(args)
}

func (e *entry) validate(args json.RawMessage) (map[string]any, error) {
	v, err := decodeObject(args)
	if err != nil {
		return nil, err
	}
	if err := e.schema.Validate(v); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidArgs, describeValidation(err))
	}
	return v, nil
}

// decodeObject parses tool arguments, which must be one JSON object. Empty
// arguments mean {} (models send "" for tools without parameters).
func decodeObject(args json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		return map[string]any{}, nil
	}
	if m, ok := decodeFlat(args); ok {
		return m, nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, fmt.Errorf("%w: arguments are not valid JSON: %v", ErrInvalidArgs, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: arguments must be a JSON object, got %s", ErrInvalidArgs, jsonKind(v))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// describeValidation renders a schema violation as "path: message" parts
// joined by "; ".
func describeValidation(err error) string {
	probs := schema.Problems(err)
	if probs == nil {
		return err.Error()
	}
	parts := make([]string, len(probs))
	for i, p := range probs {
		parts[i] = p.Location + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}
