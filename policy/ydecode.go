package policy

import (
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config"
)

// The policy file and test inputs are decoded by internal/config's strict
// YAML decoder (unknown fields, duplicate keys and wrong types are problems
// with a line and column, all of them reported); this file adapts it to
// the policy's problem list and its position-keeping leaf types.

// pos is a position in the policy file (1-based line and column).
// The decoder fills a struct's At field of this type.
type pos struct {
	Line, Col int
}

func posOf(n *yaml.Node) pos { return pos(config.PosOf(n)) }

// nodeDecoder is implemented by the file's leaf types that need their
// position or a special syntax.
type nodeDecoder interface {
	decodeNode(d *ydec, n *yaml.Node, where string)
}

// ydec decodes into the file structs, reporting to ps.
type ydec struct {
	ps *problems
	d  *config.Decoder
}

var nodeDecoderType = reflect.TypeFor[nodeDecoder]()

func (d *ydec) dec() *config.Decoder {
	if d.d == nil {
		d.d = &config.Decoder{
			Report: func(n *yaml.Node, where, msg string) {
				d.ps.add(StageSyntax, n.Line, n.Column, where, "%s", msg)
			},
			Custom: func(_ *config.Decoder, n *yaml.Node, v reflect.Value, where string) bool {
				if !v.CanAddr() || !v.Addr().Type().Implements(nodeDecoderType) {
					return false
				}
				v.Addr().Interface().(nodeDecoder).decodeNode(d, n, where)
				return true
			},
		}
	}
	return d.d
}

func (d *ydec) errAt(n *yaml.Node, where, format string, a ...any) {
	d.ps.add(StageSyntax, n.Line, n.Column, where, format, a...)
}

// decode decodes n into v (settable), describing the place as where.
func (d *ydec) decode(n *yaml.Node, v reflect.Value, where string) { d.dec().Decode(n, v, where) }

// resolve follows aliases.
func (d *ydec) resolve(n *yaml.Node) *yaml.Node { return d.dec().Resolve(n) }

func isNull(n *yaml.Node) bool     { return config.IsNull(n) }
func kindName(n *yaml.Node) string { return config.KindName(n) }

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return `"` + s + `"`
}

func sortedKeys[V any](m map[string]V) []string { return config.SortedKeys(m) }

// cleanYAMLErr drops the "yaml: " prefix of yaml.v3's messages.
func cleanYAMLErr(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// str is a string scalar that remembers where it was.
type str struct {
	V   string
	At  pos
	Set bool
}

func (s *str) decodeNode(d *ydec, n *yaml.Node, where string) {
	s.At = posOf(n)
	s.V, s.Set = d.scalar(n, where, "a string")
}

// scalar reads n for a leaf type's decodeNode: set is false for null
// (nothing written) and for a node that is not a scalar, which is
// reported as not being what.
func (d *ydec) scalar(n *yaml.Node, where, what string) (v string, set bool) {
	if isNull(n) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		d.errAt(n, where, "expected %s, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
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
	e.Src, e.Set = d.scalar(n, where, "an expression (a string)")
}

// reflectValue returns the settable value p points to.
func reflectValue(p any) reflect.Value { return reflect.ValueOf(p).Elem() }
