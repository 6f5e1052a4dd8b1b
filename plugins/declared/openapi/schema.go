package openapi

import (
	"regexp"
	"slices"

	"github.com/pb33f/libopenapi/datamodel/high/base"

	"github.com/agentkernel/agentkernel/internal/config"
)

// maxDepth bounds how deep a schema is expanded: below it, a value of any
// shape is accepted (the server still validates it).
const maxDepth = 8

// schema converts an OpenAPI schema into a self-contained JSON Schema for a
// tool's argument: $refs inlined, a reference back into itself (a cycle)
// cut to an unconstrained value with a note, OpenAPI 3.0's nullable and
// boolean exclusive bounds turned into JSON Schema's, readOnly properties
// left out (a request does not send them), annotations the model does not
// need dropped.
func (im *importer) schema(p *base.SchemaProxy, line int) map[string]any {
	c := &converter{im: im, line: line}
	return c.convert(p, nil, 0)
}

type converter struct {
	im   *importer
	line int
	cut  bool
}

func (c *converter) convert(p *base.SchemaProxy, stack []string, depth int) map[string]any {
	if p == nil {
		return map[string]any{}
	}
	if p.IsReference() {
		ref := p.GetReference()
		if slices.Contains(stack, ref) {
			if !c.cut {
				c.cut = true
				c.im.note(c.line, "the schema %s refers back to itself: cut there (any value is accepted below it)", ref)
			}
			return map[string]any{"description": "(" + ref + ", recursive: not expanded)"}
		}
		stack = append(stack, ref)
	}
	if depth > maxDepth {
		return map[string]any{"description": "(nested too deeply: not expanded)"}
	}
	s := p.Schema()
	if s == nil {
		return map[string]any{}
	}
	out := map[string]any{}
	if s.BooleanSchema != nil && !*s.BooleanSchema {
		return map[string]any{"not": map[string]any{}}
	}
	types := slices.Clone(s.Type)
	if s.Nullable != nil && *s.Nullable && len(types) > 0 && !slices.Contains(types, "null") {
		types = append(types, "null")
	}
	switch len(types) {
	case 0:
	case 1:
		out["type"] = types[0]
	default:
		out["type"] = types
	}
	if s.Title != "" && s.Description == "" {
		out["description"] = cutText(s.Title, 300)
	}
	if s.Description != "" {
		out["description"] = cutText(s.Description, 300)
	}
	if s.Format != "" {
		out["format"] = s.Format
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err == nil {
			out["pattern"] = s.Pattern
		}
	}
	if len(s.Enum) > 0 {
		var vals []any
		for _, n := range s.Enum {
			var v any
			if n != nil && n.Decode(&v) == nil {
				vals = append(vals, config.NormalizeYAML(v))
			}
		}
		if s.Nullable != nil && *s.Nullable && !slices.Contains(vals, nil) {
			vals = append(vals, nil)
		}
		out["enum"] = vals
	}
	if s.Const != nil {
		var v any
		if s.Const.Decode(&v) == nil {
			out["const"] = config.NormalizeYAML(v)
		}
	}
	if s.Default != nil {
		var v any
		if s.Default.Decode(&v) == nil {
			out["default"] = config.NormalizeYAML(v)
		}
	}
	num := func(k string, v *float64) {
		if v != nil {
			out[k] = *v
		}
	}
	integer := func(k string, v *int64) {
		if v != nil {
			out[k] = *v
		}
	}
	num("minimum", s.Minimum)
	num("maximum", s.Maximum)
	num("multipleOf", s.MultipleOf)
	bound := func(k, plain string, v *base.DynamicValue[bool, float64]) {
		switch {
		case v == nil:
		case v.IsA() && v.A: // 3.0: the bound in minimum/maximum is exclusive
			if x, ok := out[plain]; ok {
				out[k] = x
				delete(out, plain)
			}
		case v.IsB():
			out[k] = v.B
		}
	}
	bound("exclusiveMinimum", "minimum", s.ExclusiveMinimum)
	bound("exclusiveMaximum", "maximum", s.ExclusiveMaximum)
	integer("minLength", s.MinLength)
	integer("maxLength", s.MaxLength)
	integer("minItems", s.MinItems)
	integer("maxItems", s.MaxItems)
	integer("minProperties", s.MinProperties)
	integer("maxProperties", s.MaxProperties)
	if s.UniqueItems != nil && *s.UniqueItems {
		out["uniqueItems"] = true
	}
	if s.Properties != nil && s.Properties.Len() > 0 {
		props := map[string]any{}
		for name, ps := range s.Properties.FromOldest() {
			if sub := ps.Schema(); sub != nil && sub.ReadOnly != nil && *sub.ReadOnly {
				continue // the server sets it; a request does not send it
			}
			props[name] = c.convert(ps, stack, depth+1)
		}
		out["properties"] = props
		var req []string
		for _, r := range s.Required {
			if _, ok := props[r]; ok {
				req = append(req, r)
			}
		}
		if len(req) > 0 {
			out["required"] = req
		}
	}
	if s.Items != nil {
		if s.Items.IsA() && s.Items.A != nil {
			out["items"] = c.convert(s.Items.A, stack, depth+1)
		} else if s.Items.IsB() && !s.Items.B {
			out["items"] = false
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		if ap.IsA() && ap.A != nil {
			out["additionalProperties"] = c.convert(ap.A, stack, depth+1)
		} else if ap.IsB() && !ap.B {
			out["additionalProperties"] = false
		}
	}
	list := func(k string, ps []*base.SchemaProxy) {
		if len(ps) == 0 {
			return
		}
		var subs []any
		for _, x := range ps {
			subs = append(subs, c.convert(x, stack, depth+1))
		}
		out[k] = subs
	}
	list("allOf", s.AllOf)
	list("oneOf", s.OneOf)
	list("anyOf", s.AnyOf)
	return out
}
