package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Pos is a position in a YAML file (1-based line and column).
type Pos struct {
	Line, Col int
}

// PosOf returns the position of n.
func PosOf(n *yaml.Node) Pos { return Pos{n.Line, n.Column} }

// Decoder decodes a yaml.Node tree into Go values strictly: unknown fields,
// duplicate keys and wrong types are problems with a line, a column and a
// field, and every problem of the document is reported, not only the
// first. A struct field named At of type Pos (or a struct type with the
// same fields) gets the position of the
// struct's mapping. Fields are matched by their yaml tag; time.Time wants
// RFC 3339, time.Duration and Duration a Go duration string.
//
// A Decoder is for one document; it is not safe for concurrent use.
type Decoder struct {
	// File names the document in the Errors collected when Report is nil.
	File string
	// Report, when set, receives every problem instead of Errors.
	Report func(n *yaml.Node, where, msg string)
	// Custom, when set, is asked first for every value: it returns true
	// when it decoded n into v itself (and reported its own problems).
	Custom func(d *Decoder, n *yaml.Node, v reflect.Value, where string) bool
	// Errors are the problems found, when Report is nil.
	Errors []*Error

	depth int
	// nodes counts the nodes decoded, aliases expanded: a document that
	// refers to the same anchor over and over (a "billion laughs") stops
	// at MaxNodes instead of taking exponential time.
	nodes    int
	overflow bool
}

// The Decoder's bounds.
const (
	MaxNodes      = 200_000
	maxAliasDepth = 32
	maxDepth      = 64
)

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
	configDurT   = reflect.TypeFor[Duration]()
	posType      = reflect.TypeFor[Pos]()
)

// Errorf reports a problem at n; where is the field.
func (d *Decoder) Errorf(n *yaml.Node, where, format string, a ...any) {
	msg := format
	if len(a) > 0 {
		msg = fmt.Sprintf(format, a...)
	}
	if d.Report != nil {
		d.Report(n, where, msg)
		return
	}
	d.Errors = append(d.Errors, &Error{File: d.File, Line: n.Line, Column: n.Column, Field: where, Err: errors.New(msg)})
}

// Resolve follows aliases; nil for a chain too long.
func (d *Decoder) Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > maxAliasDepth {
			return nil
		}
		n = n.Alias
	}
	return n
}

// Decode decodes n into v (settable), describing the place as where.
func (d *Decoder) Decode(n *yaml.Node, v reflect.Value, where string) {
	n = d.Resolve(n)
	if n == nil {
		return
	}
	d.nodes++
	if d.nodes > MaxNodes {
		if !d.overflow {
			d.overflow = true
			d.Errorf(n, where, "the document expands to more than %d nodes (aliases referring to aliases?)", MaxNodes)
		}
		return
	}
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxDepth {
		d.Errorf(n, where, "nested too deeply")
		return
	}
	if d.Custom != nil && d.Custom(d, n, v, where) {
		return
	}
	if IsNull(n) {
		return // the zero value; required fields are checked later
	}
	switch v.Type() {
	case timeType:
		var t time.Time
		if n.Kind != yaml.ScalarNode || n.Decode(&t) != nil {
			d.Errorf(n, where, "expected an RFC 3339 time such as 2026-01-02T15:04:05Z, got %s", KindName(n))
			return
		}
		v.Set(reflect.ValueOf(t))
		return
	case durationType, configDurT:
		t, err := time.ParseDuration(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.Errorf(n, where, "expected a duration such as \"90s\" or \"10m\", got %s", KindName(n))
			return
		}
		v.SetInt(int64(t))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		d.Decode(n, nv.Elem(), where)
		v.Set(nv)
	case reflect.Struct:
		d.DecodeStruct(n, v, where)
	case reflect.Slice:
		d.decodeSlice(n, v, where)
	case reflect.Map:
		d.decodeMap(n, v, where)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.Errorf(n, where, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			return
		}
		v.Set(reflect.ValueOf(NormalizeYAML(x)))
	default:
		if n.Kind != yaml.ScalarNode {
			d.Errorf(n, where, "expected %s, got %s", scalarKind(v.Type()), KindName(n))
			return
		}
		if v.Kind() == reflect.String {
			v.SetString(n.Value)
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.Errorf(n, where, "expected %s, got %s", scalarKind(v.Type()), KindName(n))
		}
	}
}

func (d *Decoder) decodeSlice(n *yaml.Node, v reflect.Value, where string) {
	if n.Kind != yaml.SequenceNode {
		d.Errorf(n, where, "expected a list, got %s", KindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, c := range n.Content {
		if c := d.Resolve(c); c != nil && IsNull(c) {
			d.Errorf(c, where, "item %d of the list is empty", i)
			continue
		}
		d.Decode(c, s.Index(i), where+"["+strconv.Itoa(i)+"]")
	}
	v.Set(s)
}

func (d *Decoder) decodeMap(n *yaml.Node, v reflect.Value, where string) {
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, where, "expected a mapping, got %s", KindName(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	d.eachKey(n, where, "key %q appears twice", func(k, val *yaml.Node) {
		e := reflect.New(v.Type().Elem()).Elem()
		d.Decode(val, e, where+"."+k.Value)
		m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
	})
	v.Set(m)
}

// eachKey calls fn for each key of a mapping once, reporting keys that are
// not strings and keys seen before (dup formats the message).
func (d *Decoder) eachKey(n *yaml.Node, where, dup string, fn func(k, val *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := d.Resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			d.Errorf(n.Content[i], where, "keys must be strings")
			continue
		}
		if seen[k.Value] {
			d.Errorf(k, where, dup, k.Value)
			continue
		}
		if k.Value != "<<" {
			seen[k.Value] = true
		}
		fn(k, val)
	}
}

func scalarKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return "a " + t.String()
}

// DecodeStruct decodes a mapping into the struct v by yaml tags; a YAML
// merge key ("<<") decodes the merged mapping(s) in place.
func (d *Decoder) DecodeStruct(n *yaml.Node, v reflect.Value, where string) {
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, where, "expected a mapping, got %s", KindName(n))
		return
	}
	t := v.Type()
	if f, ok := t.FieldByName("At"); ok && f.Type.Kind() == reflect.Struct && posType.ConvertibleTo(f.Type) {
		v.FieldByIndex(f.Index).Set(reflect.ValueOf(PosOf(n)).Convert(f.Type))
	}
	fields := map[string]reflect.Value{}
	for i := range t.NumField() {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			fields[tag] = v.Field(i)
		}
	}
	d.DecodeFields(n, fields, where)
}

// DecodeFields decodes a mapping key by key into the settable values
// fields names: the form of DecodeStruct for a mapping whose keys land in
// places other than one struct's fields (a policy test input's session
// and run keys go straight into the fields of a kernel.State). Unknown and
// repeated keys are errors at their line and column; a merge key ("<<")
// decodes the merged mapping(s) in place.
func (d *Decoder) DecodeFields(n *yaml.Node, fields map[string]reflect.Value, where string) {
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, where, "expected a mapping, got %s", KindName(n))
		return
	}
	d.eachKey(n, where, "field %q appears twice", func(k, val *yaml.Node) {
		if k.Value == "<<" {
			m := d.Resolve(val)
			if m != nil && m.Kind == yaml.SequenceNode {
				for _, c := range m.Content {
					d.DecodeFields(d.Resolve(c), fields, where)
				}
			} else if m != nil {
				d.DecodeFields(m, fields, where)
			}
			return
		}
		f, ok := fields[k.Value]
		if !ok {
			valid := SortedKeys(fields)
			d.Errorf(k, where, "unknown field %q%s (valid fields: %s)", k.Value, DidYouMean(k.Value, valid), strings.Join(valid, ", "))
			return
		}
		sub := k.Value
		if where != "" {
			sub = where + "." + k.Value
		}
		d.Decode(val, f, sub)
	})
}

// SortedKeys returns the keys of m in order.
func SortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// NormalizeYAML turns what yaml.v3 decodes into the shapes JSON decoding
// gives (map[string]any, float64 for every number, RFC 3339 strings for
// times), so a value from YAML looks exactly like one from JSON.
func NormalizeYAML(x any) any {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			x[k] = NormalizeYAML(v)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, v := range x {
			m[keyString(k)] = NormalizeYAML(v)
		}
		return m
	case []any:
		for i, v := range x {
			x[i] = NormalizeYAML(v)
		}
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return x
}

func keyString(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(k)
	return strings.TrimSpace(string(b))
}
