package policy

import (
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// pos is a position in the policy file (1-based line and column).
type pos struct {
	Line, Col int
}

func posOf(n *yaml.Node) pos { return pos{n.Line, n.Column} }

// nodeDecoder is implemented by the file's leaf types that need their
// position or a special syntax.
type nodeDecoder interface {
	decodeNode(d *ydec, n *yaml.Node, where string)
}

// ydec decodes a yaml.Node tree into the file structs strictly: unknown
// fields, duplicate keys and wrong types are problems with a line and
// column, and every problem of the file is reported, not only the first.
type ydec struct {
	ps    *problems
	depth int
	// nodes counts the nodes decoded, aliases expanded: a document that
	// refers to the same anchor over and over (a "billion laughs") stops
	// at maxNodes instead of taking exponential time.
	nodes    int
	overflow bool
}

const maxNodes = 200_000

var (
	nodeDecoderType = reflect.TypeFor[nodeDecoder]()
	timeType        = reflect.TypeFor[time.Time]()
	durationType    = reflect.TypeFor[time.Duration]()
	posType         = reflect.TypeFor[pos]()
)

const maxAliasDepth = 32

func (d *ydec) errAt(n *yaml.Node, where, format string, a ...any) {
	d.ps.add(StageSyntax, n.Line, n.Column, where, format, a...)
}

// resolve follows aliases.
func (d *ydec) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > maxAliasDepth {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing (null)"
		}
		return "the scalar " + quoteShort(n.Value)
	}
	return "something else"
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return `"` + s + `"`
}

// decode decodes n into v (settable), describing the place as where.
func (d *ydec) decode(n *yaml.Node, v reflect.Value, where string) {
	n = d.resolve(n)
	if n == nil {
		return
	}
	d.nodes++
	if d.nodes > maxNodes {
		if !d.overflow {
			d.overflow = true
			d.errAt(n, where, "the document expands to more than %d nodes (aliases referring to aliases?)", maxNodes)
		}
		return
	}
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > 64 {
		d.errAt(n, where, "nested too deeply")
		return
	}
	if v.CanAddr() && v.Addr().Type().Implements(nodeDecoderType) {
		v.Addr().Interface().(nodeDecoder).decodeNode(d, n, where)
		return
	}
	if isNull(n) {
		return // the zero value; required fields are checked later
	}
	switch v.Type() {
	case timeType:
		var t time.Time
		if n.Kind != yaml.ScalarNode || n.Decode(&t) != nil {
			d.errAt(n, where, "expected an RFC 3339 time such as 2026-01-02T15:04:05Z, got %s", kindName(n))
			return
		}
		v.Set(reflect.ValueOf(t))
		return
	case durationType:
		t, err := time.ParseDuration(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.errAt(n, where, "expected a duration such as \"90s\" or \"10m\", got %s", kindName(n))
			return
		}
		v.SetInt(int64(t))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		d.decode(n, nv.Elem(), where)
		v.Set(nv)
	case reflect.Struct:
		d.decodeStruct(n, v, where)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errAt(n, where, "expected a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			if c := d.resolve(c); c != nil && isNull(c) {
				d.errAt(c, where, "item %d of the list is empty", i)
				continue
			}
			d.decode(c, s.Index(i), where+"["+itoa(i)+"]")
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.errAt(n, where, "expected a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := d.resolve(n.Content[i]), n.Content[i+1]
			if k == nil || k.Kind != yaml.ScalarNode {
				d.errAt(n.Content[i], where, "keys must be strings")
				continue
			}
			if seen[k.Value] {
				d.errAt(k, where, "key %q appears twice", k.Value)
				continue
			}
			seen[k.Value] = true
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, e, where+"."+k.Value)
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.errAt(n, where, "%s", cleanYAMLErr(err))
			return
		}
		v.Set(reflect.ValueOf(normalizeYAML(x)))
	default:
		if n.Kind != yaml.ScalarNode {
			d.errAt(n, where, "expected %s, got %s", scalarKind(v.Type()), kindName(n))
			return
		}
		if v.Kind() == reflect.String {
			v.SetString(n.Value)
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.errAt(n, where, "expected %s, got %s", scalarKind(v.Type()), kindName(n))
		}
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

func (d *ydec) decodeStruct(n *yaml.Node, v reflect.Value, where string) {
	if n.Kind != yaml.MappingNode {
		d.errAt(n, where, "expected a mapping, got %s", kindName(n))
		return
	}
	t := v.Type()
	if f, ok := t.FieldByName("At"); ok && f.Type == posType {
		v.FieldByIndex(f.Index).Set(reflect.ValueOf(posOf(n)))
	}
	fields := map[string]int{}
	for i := range t.NumField() {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			fields[tag] = i
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := d.resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			d.errAt(n.Content[i], where, "keys must be strings")
			continue
		}
		if k.Value == "<<" { // a YAML merge key: decode the merged mapping(s) here
			m := d.resolve(val)
			if m != nil && m.Kind == yaml.SequenceNode {
				for _, c := range m.Content {
					d.decodeStruct(d.resolve(c), v, where)
				}
			} else if m != nil {
				d.decodeStruct(m, v, where)
			}
			continue
		}
		fi, ok := fields[k.Value]
		if !ok {
			d.errAt(k, where, "unknown field %q (valid fields: %s)", k.Value, strings.Join(sortedKeys(fields), ", "))
			continue
		}
		if seen[k.Value] {
			d.errAt(k, where, "field %q appears twice", k.Value)
			continue
		}
		seen[k.Value] = true
		sub := k.Value
		if where != "" {
			sub = where + "." + k.Value
		}
		d.decode(val, v.Field(fi), sub)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// cleanYAMLErr drops the "yaml: " prefix of yaml.v3's messages.
func cleanYAMLErr(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// normalizeYAML turns what yaml.v3 decodes into the shapes JSON decoding
// gives (map[string]any, float64 for every number), so a test case's
// arguments look exactly like a real call's.
func normalizeYAML(x any) any {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			x[k] = normalizeYAML(v)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, v := range x {
			m[toString(k)] = normalizeYAML(v)
		}
		return m
	case []any:
		for i, v := range x {
			x[i] = normalizeYAML(v)
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

func toString(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(k)
	return strings.TrimSpace(string(b))
}

// str is a string scalar that remembers where it was.
type str struct {
	V   string
	At  pos
	Set bool
}

func (s *str) decodeNode(d *ydec, n *yaml.Node, where string) {
	s.At = posOf(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode {
		d.errAt(n, where, "expected a string, got %s", kindName(n))
		return
	}
	s.V, s.Set = n.Value, true
}

// exprSrc is an expression as written in the file, with what is needed to
// map a position inside the expression back to the file.
type exprSrc struct {
	Src   string
	At    pos
	Style yaml.Style
	Set   bool
	// Comment is a comment YAML found on the same line: in a plain scalar,
	// " #" starts one, which silently cuts an expression short.
	Comment string
}

func (e *exprSrc) decodeNode(d *ydec, n *yaml.Node, where string) {
	e.At, e.Style, e.Comment = posOf(n), n.Style, n.LineComment
	if isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode {
		d.errAt(n, where, "expected an expression (a string), got %s", kindName(n))
		return
	}
	e.Src, e.Set = n.Value, true
}

// reflectValue returns the settable value p points to.
func reflectValue(p any) reflect.Value { return reflect.ValueOf(p).Elem() }
