package declared

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// argSchema is a declared tool's argument schema, with what the templates
// are checked against: its properties and the required ones.
type argSchema struct {
	raw      json.RawMessage
	props    []string
	required []string
}

// parseArgSchema turns the configured args (a YAML mapping, decoded as JSON
// decodes) into the tool's schema. None means no arguments.
func parseArgSchema(v any) (argSchema, error) {
	if v == nil {
		return argSchema{raw: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return argSchema{}, errors.New("must be a JSON Schema of an object (type: object, properties: ...)")
	}
	if t, ok := m["type"]; ok && t != "object" {
		return argSchema{}, fmt.Errorf("type is %v: a tool's arguments are an object (type: object)", t)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return argSchema{}, err
	}
	s := argSchema{raw: raw}
	if props, ok := m["properties"].(map[string]any); ok {
		for k := range props {
			s.props = append(s.props, k)
		}
		slices.Sort(s.props)
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if r, ok := r.(string); ok {
				s.required = append(s.required, r)
			}
		}
	}
	return s, nil
}

// check says what is wrong with templates naming args: each must be a
// property; a path placeholder must also be required.
func (s argSchema) check(names []string) error {
	for _, n := range names {
		if !slices.Contains(s.props, n) {
			have := "args declares none"
			if len(s.props) > 0 {
				have = "args declares " + strings.Join(s.props, ", ")
			}
			return fmt.Errorf("{%s} names an argument args does not declare (%s)", n, have)
		}
	}
	return nil
}

func (s argSchema) requires(names []string) error {
	for _, n := range names {
		if !slices.Contains(s.required, n) {
			return fmt.Errorf("{%s} is in the URL's path, so args must list it in required", n)
		}
	}
	return nil
}
