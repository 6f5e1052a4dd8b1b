package policy

import (
	"reflect"
	"strings"
	"unsafe"

	"github.com/expr-lang/expr/ast"
)

// The fast path in this file evaluates the commonest shapes of policy
// expressions (a field or a tool argument compared with a constant,
// contains/startsWith/endsWith on strings, and/or/not of those) with
// closures over the Env instead of expr's VM, which reads every field and
// map entry through reflection and boxes what it reads. It is built from
// the tree expr checked and optimised (program.node), so constants and
// inlined vars are those the VM runs.
//
// It only ever says "I know": a closure returns ok=false whenever a value
// is not one of the plain types it handles (int, float64, string, bool:
// a nil, a missing argument, a nested object, a time.Duration...), and
// eval then runs the VM on the same Env, so every error, message and
// corner case stays expr's. Reading the Env has no side effects, so
// giving up half way and running the VM is the same as never starting.
// TestFastPathAgreesWithVM holds the closures to the VM's results on a
// corpus of expressions and random Envs. RATIONALE.md, "Policy
// expressions: a closure fast path beside the VM (issue 45)".

// fastKind is the type of a fastVal.
type fastKind uint8

const (
	fkInt fastKind = iota + 1
	fkFloat
	fkString
	fkBool
)

// fastVal is a value of one of the handled types, unboxed (no allocation).
type fastVal struct {
	k fastKind
	i int
	f float64
	s string
	b bool
}

// fastExpr evaluates a node on env; ok is false when the fast path cannot
// say (the VM decides).
type fastExpr func(env *Env) (v fastVal, ok bool)

var envType = reflect.TypeFor[Env]()

var (
	typeInt    = reflect.TypeFor[int]()
	typeFloat  = reflect.TypeFor[float64]()
	typeString = reflect.TypeFor[string]()
	typeBool   = reflect.TypeFor[bool]()
	typeArgs   = reflect.TypeFor[map[string]any]()
)

// buildFast returns the fast closure of a boolean expression's tree, or nil
// when some node is not of a handled shape.
func buildFast(n ast.Node) fastExpr {
	if n == nil {
		return nil
	}
	f := fastNode(n)
	if f == nil {
		return nil
	}
	return func(env *Env) (fastVal, bool) {
		v, ok := f(env)
		return v, ok && v.k == fkBool
	}
}

func fastNode(n ast.Node) fastExpr {
	switch n := n.(type) {
	case *ast.IntegerNode:
		v := fastVal{k: fkInt, i: n.Value}
		return func(*Env) (fastVal, bool) { return v, true }
	case *ast.FloatNode:
		v := fastVal{k: fkFloat, f: n.Value}
		return func(*Env) (fastVal, bool) { return v, true }
	case *ast.StringNode:
		v := fastVal{k: fkString, s: n.Value}
		return func(*Env) (fastVal, bool) { return v, true }
	case *ast.BoolNode:
		v := fastVal{k: fkBool, b: n.Value}
		return func(*Env) (fastVal, bool) { return v, true }
	case *ast.ConstantNode:
		v, ok := fastConst(n.Value)
		if !ok {
			return nil
		}
		return func(*Env) (fastVal, bool) { return v, true }
	case *ast.MemberNode:
		return fastMember(n)
	case *ast.UnaryNode:
		if n.Operator != "!" && n.Operator != "not" {
			return nil
		}
		x := fastNode(n.Node)
		if x == nil {
			return nil
		}
		return func(env *Env) (fastVal, bool) {
			v, ok := x(env)
			if !ok || v.k != fkBool {
				return fastVal{}, false
			}
			return fastVal{k: fkBool, b: !v.b}, true
		}
	case *ast.BinaryNode:
		return fastBinary(n)
	}
	return nil
}

func fastConst(v any) (fastVal, bool) {
	switch v := v.(type) {
	case int:
		return fastVal{k: fkInt, i: v}, true
	case float64:
		return fastVal{k: fkFloat, f: v}, true
	case string:
		return fastVal{k: fkString, s: v}, true
	case bool:
		return fastVal{k: fkBool, b: v}, true
	}
	return fastVal{}, false
}

func fastBinary(n *ast.BinaryNode) fastExpr {
	l, r := fastNode(n.Left), fastNode(n.Right)
	if l == nil || r == nil {
		return nil
	}
	switch n.Operator {
	case "&&", "and", "||", "or":
		// Short-circuit as the VM does: the right side runs only when
		// the left does not decide.
		or := n.Operator == "||" || n.Operator == "or"
		return func(env *Env) (fastVal, bool) {
			a, ok := l(env)
			if !ok || a.k != fkBool {
				return fastVal{}, false
			}
			if a.b == or {
				return a, true
			}
			b, ok := r(env)
			if !ok || b.k != fkBool {
				return fastVal{}, false
			}
			return b, true
		}
	case "==", "!=":
		neg := n.Operator == "!="
		return func(env *Env) (fastVal, bool) {
			a, ok1 := l(env)
			b, ok2 := r(env)
			if !ok1 || !ok2 {
				return fastVal{}, false
			}
			eq, ok := fastEqual(a, b)
			if !ok {
				return fastVal{}, false
			}
			return fastVal{k: fkBool, b: eq != neg}, true
		}
	case "<", ">", "<=", ">=":
		op := cmpOpOf(n.Operator)
		if f := fastIntFieldCompare(n, op); f != nil {
			return f
		}
		if k, isConst := constOf(n.Right); isConst {
			// A constant on the right (call.args.limit > 10000): read
			// once at build time, not through a closure per evaluation.
			return func(env *Env) (fastVal, bool) {
				a, ok := l(env)
				if !ok {
					return fastVal{}, false
				}
				c, ok := fastCompare(a, k)
				if !ok {
					return fastVal{}, false
				}
				return fastVal{k: fkBool, b: op.holds(c)}, true
			}
		}
		return func(env *Env) (fastVal, bool) {
			a, ok1 := l(env)
			b, ok2 := r(env)
			if !ok1 || !ok2 {
				return fastVal{}, false
			}
			c, ok := fastCompare(a, b)
			if !ok {
				return fastVal{}, false
			}
			return fastVal{k: fkBool, b: op.holds(c)}, true
		}
	case "contains", "startsWith", "endsWith":
		f := strings.Contains
		switch n.Operator {
		case "startsWith":
			f = strings.HasPrefix
		case "endsWith":
			f = strings.HasSuffix
		}
		if k, isConst := constOf(n.Right); isConst && k.k == fkString {
			// A constant string on the right (call.args.path contains
			// ".env"): read once at build time.
			return func(env *Env) (fastVal, bool) {
				a, ok := l(env)
				if !ok || a.k != fkString {
					return fastVal{}, false
				}
				return fastVal{k: fkBool, b: f(a.s, k.s)}, true
			}
		}
		return func(env *Env) (fastVal, bool) {
			a, ok1 := l(env)
			b, ok2 := r(env)
			if !ok1 || !ok2 || a.k != fkString || b.k != fkString {
				return fastVal{}, false
			}
			return fastVal{k: fkBool, b: f(a.s, b.s)}, true
		}
	}
	return nil
}

// cmpOp is an ordering operator, decided when the closure is built.
type cmpOp uint8

const (
	opLess cmpOp = iota
	opMore
	opLessEq
	opMoreEq
)

func cmpOpOf(op string) cmpOp {
	switch op {
	case "<":
		return opLess
	case ">":
		return opMore
	case "<=":
		return opLessEq
	}
	return opMoreEq
}

// holds reports whether op holds for c, fastCompare's -1, 0 or 1.
func (op cmpOp) holds(c int) bool {
	switch op {
	case opLess:
		return c < 0
	case opMore:
		return c > 0
	case opLessEq:
		return c <= 0
	}
	return c >= 0
}

// constOf returns the value of a constant node of a handled type.
func constOf(n ast.Node) (fastVal, bool) {
	switch n := n.(type) {
	case *ast.IntegerNode:
		return fastVal{k: fkInt, i: n.Value}, true
	case *ast.FloatNode:
		return fastVal{k: fkFloat, f: n.Value}, true
	case *ast.StringNode:
		return fastVal{k: fkString, s: n.Value}, true
	case *ast.ConstantNode:
		return fastConst(n.Value)
	}
	return fastVal{}, false
}

// fastIntFieldCompare is the commonest budget shape, an int field of the
// Env ordered against an int constant (run.turn > budget.max_turns), as
// one closure reading the int where it lies: what the general closures
// answer for it (fastCompare's ints as ints), without a closure call per
// side. It returns nil for any other shape.
func fastIntFieldCompare(n *ast.BinaryNode, op cmpOp) fastExpr {
	m, ok := n.Left.(*ast.MemberNode)
	if !ok {
		return nil
	}
	off, t, ok := memberAt(m)
	if !ok || t != typeInt {
		return nil
	}
	c, ok := constOf(n.Right)
	if !ok || c.k != fkInt {
		return nil
	}
	k := c.i
	return func(env *Env) (fastVal, bool) {
		return fastVal{k: fkBool, b: op.holds(cmpOrd(*(*int)(unsafe.Add(unsafe.Pointer(env), off)), k))}, true
	}
}

// fastEqual is runtime.Equal on the handled types: numbers compare as
// numbers (int with int as ints, else as float64), strings and bools by
// value. Other pairs (a string with a number...) are left to the VM.
func fastEqual(a, b fastVal) (bool, bool) {
	switch {
	case a.k == fkInt && b.k == fkInt:
		return a.i == b.i, true
	case isNum(a) && isNum(b):
		return num(a) == num(b), true
	case a.k == fkString && b.k == fkString:
		return a.s == b.s, true
	case a.k == fkBool && b.k == fkBool:
		return a.b == b.b, true
	}
	return false, false
}

// fastCompare orders two numbers as runtime.Less and More do (ints as
// ints, a float64 on either side as float64s) and two strings by bytes;
// it reports -1, 0 or 1, or ok=false for anything else. NaN compares as
// neither less, equal nor greater in Go: it is left to the VM.
func fastCompare(a, b fastVal) (int, bool) {
	switch {
	case a.k == fkInt && b.k == fkInt:
		return cmpOrd(a.i, b.i), true
	case isNum(a) && isNum(b):
		x, y := num(a), num(b)
		if x != x || y != y {
			return 0, false
		}
		return cmpOrd(x, y), true
	case a.k == fkString && b.k == fkString:
		return strings.Compare(a.s, b.s), true
	}
	return 0, false
}

func cmpOrd[T int | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func isNum(v fastVal) bool { return v.k == fkInt || v.k == fkFloat }

func num(v fastVal) float64 {
	if v.k == fkInt {
		return float64(v.i)
	}
	return v.f
}

// fastMember reads a field path from the Env's root (session.turns,
// run.turn, tool.name...), optionally ending in one constant key of
// call.args. Only plain struct fields of the handled types are read; a
// pointer, an embedded field, an optional (?.) or a method is left to the
// VM.
func fastMember(n *ast.MemberNode) fastExpr {
	names, ok := memberPath(n)
	if !ok {
		return nil
	}
	t := envType
	var off uintptr
	for i, name := range names {
		if t == typeArgs && i == len(names)-1 {
			return fastArg(off, name)
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		f, ok := exprField(t, name)
		if !ok {
			return nil
		}
		off += f.Offset
		t = f.Type
	}
	// Every step was a struct field held by value (a pointer or a map
	// ends the walk above), so the value lies at off in the Env: read it
	// as the type the walk found, no reflection at evaluation.
	switch t {
	case typeInt:
		return func(env *Env) (fastVal, bool) {
			return fastVal{k: fkInt, i: *(*int)(unsafe.Add(unsafe.Pointer(env), off))}, true
		}
	case typeFloat:
		return func(env *Env) (fastVal, bool) {
			return fastVal{k: fkFloat, f: *(*float64)(unsafe.Add(unsafe.Pointer(env), off))}, true
		}
	case typeString:
		return func(env *Env) (fastVal, bool) {
			return fastVal{k: fkString, s: *(*string)(unsafe.Add(unsafe.Pointer(env), off))}, true
		}
	case typeBool:
		return func(env *Env) (fastVal, bool) {
			return fastVal{k: fkBool, b: *(*bool)(unsafe.Add(unsafe.Pointer(env), off))}, true
		}
	}
	return nil
}

// memberPath returns the names of a member path from the Env's root
// (run.turn: run, turn); ok is false for an optional (?.), a method or a
// computed key.
func memberPath(n *ast.MemberNode) ([]string, bool) {
	var names []string
	var cur ast.Node = n
	for {
		m, ok := cur.(*ast.MemberNode)
		if !ok {
			break
		}
		if m.Optional || m.Method {
			return nil, false
		}
		key, ok := m.Property.(*ast.StringNode)
		if !ok {
			return nil, false
		}
		names = append([]string{key.Value}, names...)
		cur = m.Node
	}
	root, ok := cur.(*ast.IdentifierNode)
	if !ok {
		return nil, false
	}
	return append([]string{root.Value}, names...), true
}

// memberAt returns where in the Env a member path of plain struct fields
// held by value lies, and its type (fastMember's walk; call.args.<key>, a
// pointer or a map gives ok=false).
func memberAt(n *ast.MemberNode) (uintptr, reflect.Type, bool) {
	names, ok := memberPath(n)
	if !ok {
		return 0, nil, false
	}
	t := envType
	var off uintptr
	for _, name := range names {
		if t.Kind() != reflect.Struct {
			return 0, nil, false
		}
		f, ok := exprField(t, name)
		if !ok {
			return 0, nil, false
		}
		off += f.Offset
		t = f.Type
	}
	return off, t, true
}

// fastArg reads call.args.<key> (the map[string]any at off) when its value
// is a string, float64, int or bool; a missing key or any other value is
// left to the VM.
func fastArg(off uintptr, key string) fastExpr {
	return func(env *Env) (fastVal, bool) {
		m := *(*map[string]any)(unsafe.Add(unsafe.Pointer(env), off))
		return fastConst(m[key])
	}
}

// exprField finds the field expr resolves name to in struct t: the field
// tagged expr:"name", else the field named name. A struct with an embedded
// field is left to the VM (expr follows Go's promotion rules there).
func exprField(t reflect.Type, name string) (reflect.StructField, bool) {
	var found reflect.StructField
	n := 0
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return reflect.StructField{}, false
		}
		tag := f.Tag.Get("expr")
		if tag == "-" {
			continue
		}
		if tag == name || (tag == "" && f.Name == name) {
			found = f
			n++
		}
	}
	if n != 1 || !found.IsExported() {
		return reflect.StructField{}, false
	}
	return found, true
}
