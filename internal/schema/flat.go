package schema

import (
	"encoding/json"
	"math"
)

// flat is the common shape of a tool's argument schema checked without
// the general validator: an object whose properties each have at most one
// primitive "type" and only annotations besides, a "required" list and a
// boolean "additionalProperties". Most tool schemas have this shape, and
// the general validator costs a run about twenty allocations per call
// (RATIONALE.md, "Performance, round three: the loop").
//
// flat only says yes: valid reports true when v is certainly valid against
// the schema; any other value (a violation, or a value it does not judge)
// goes to the general validator, which decides and words the error. So a
// mistake here can cost time, never let a wrong value through, provided
// valid never says true for an invalid value: TestFlatAgreesWithValidator
// holds that.
type flat struct {
	props    map[string]string // property name -> its "type", "" for any
	required []string
	closed   bool // additionalProperties: false
}

// annotations are the keywords that never affect validation.
var annotations = map[string]bool{"description": true, "title": true, "default": true, "examples": true}

// flatTypes are the "type" values flat checks.
var flatTypes = map[string]bool{"string": true, "integer": true, "number": true, "boolean": true, "null": true, "array": true, "object": true}

// newFlat returns the flat form of the schema document doc, or nil when
// doc has any other shape.
func newFlat(doc any) *flat {
	top, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	f := &flat{props: map[string]string{}}
	for k, v := range top {
		switch k {
		case "type":
			if v != "object" {
				return nil
			}
		case "properties":
			ps, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			for name, p := range ps {
				t, ok := flatProperty(p)
				if !ok {
					return nil
				}
				f.props[name] = t
			}
		case "required":
			names, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, n := range names {
				s, ok := n.(string)
				if !ok {
					return nil
				}
				f.required = append(f.required, s)
			}
		case "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil
			}
			f.closed = !b
		default:
			if !annotations[k] {
				return nil
			}
		}
	}
	return f
}

// flatProperty returns the type of a property schema made of at most one
// primitive "type" and annotations.
func flatProperty(p any) (string, bool) {
	m, ok := p.(map[string]any)
	if !ok {
		return "", false
	}
	t := ""
	for k, v := range m {
		if k == "type" {
			s, ok := v.(string)
			if !ok || !flatTypes[s] {
				return "", false
			}
			t = s
		} else if !annotations[k] {
			return "", false
		}
	}
	return t, true
}

// valid reports whether v is certainly valid (see flat).
func (f *flat) valid(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, r := range f.required {
		if _, ok := m[r]; !ok {
			return false
		}
	}
	for k, val := range m {
		t, known := f.props[k]
		if !known {
			if f.closed {
				return false
			}
			continue
		}
		if t != "" && !hasType(val, t) {
			return false
		}
	}
	return true
}

// hasType reports whether v, as encoding/json decodes it, is certainly of
// JSON Schema type t. An integer is an integral float64 or a json.Number
// of digits only (others go to the general validator).
func hasType(v any, t string) bool {
	switch v := v.(type) {
	case string:
		return t == "string"
	case bool:
		return t == "boolean"
	case nil:
		return t == "null"
	case float64:
		return t == "number" || t == "integer" && v == math.Trunc(v) && !math.IsInf(v, 0)
	case json.Number:
		return t == "number" || t == "integer" && digits(string(v))
	case map[string]any:
		return t == "object"
	case []any:
		return t == "array"
	}
	return false
}

func digits(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
