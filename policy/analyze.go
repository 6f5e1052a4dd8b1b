package policy

import (
	"slices"
	"sort"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
)

// toolScope is what analysis learns about the tools an expression can hold
// for: names (nil means any tool) and whether anything but the tool name
// is tested (rest). A rule whose when has rest == false holds for every call
// of its tools: it is unconditional for them.
type toolScope struct {
	names map[string]bool
	rest  bool
}

// analyze finds the tool names a boolean expression can be true for, from
// conditions on tool.name or call.tool: x == "name", "name" == x,
// x in ["a", "b"], combined with and/or. Anything else counts as "any tool"
// (a safe over-approximation: the rule is then checked for every tool).
func analyze(n ast.Node) toolScope {
	switch n := n.(type) {
	case *ast.BoolNode:
		if n.Value {
			return toolScope{}
		}
		return toolScope{names: map[string]bool{}} // false holds for no tool
	case *ast.BinaryNode:
		switch n.Operator {
		case "&&", "and":
			l, r := analyze(n.Left), analyze(n.Right)
			return toolScope{names: intersect(l.names, r.names), rest: l.rest || r.rest}
		case "||", "or":
			l, r := analyze(n.Left), analyze(n.Right)
			if l.names == nil || r.names == nil {
				return toolScope{rest: true}
			}
			return toolScope{names: union(l.names, r.names), rest: l.rest || r.rest}
		case "==":
			if isToolName(n.Left) {
				if s, ok := n.Right.(*ast.StringNode); ok {
					return toolScope{names: map[string]bool{s.Value: true}}
				}
			}
			if isToolName(n.Right) {
				if s, ok := n.Left.(*ast.StringNode); ok {
					return toolScope{names: map[string]bool{s.Value: true}}
				}
			}
		case "in":
			if isToolName(n.Left) {
				if names, ok := stringSet(n.Right); ok {
					return toolScope{names: names}
				}
			}
		}
	}
	return toolScope{rest: true}
}

// isToolName reports whether n is tool.name or call.tool.
func isToolName(n ast.Node) bool {
	m, ok := n.(*ast.MemberNode)
	if !ok {
		return false
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	p, ok2 := m.Property.(*ast.StringNode)
	return ok && ok2 && (id.Value == "tool" && p.Value == "name" || id.Value == "call" && p.Value == "tool")
}

// stringSet reads a constant list of strings (the optimiser turns
// x in ["a", "b"] into a set constant).
func stringSet(n ast.Node) (map[string]bool, bool) {
	out := map[string]bool{}
	switch n := n.(type) {
	case *ast.ArrayNode:
		for _, e := range n.Nodes {
			s, ok := e.(*ast.StringNode)
			if !ok {
				return nil, false
			}
			out[s.Value] = true
		}
		return out, true
	case *ast.ConstantNode:
		switch v := n.Value.(type) {
		case map[string]struct{}:
			for k := range v {
				out[k] = true
			}
			return out, true
		case []any:
			for _, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, false
				}
				out[s] = true
			}
			return out, true
		case []string:
			for _, s := range v {
				out[s] = true
			}
			return out, true
		}
	}
	return nil, false
}

func intersect(a, b map[string]bool) map[string]bool {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := map[string]bool{}
	for k := range a {
		if b[k] {
			out[k] = true
		}
	}
	return out
}

func union(a, b map[string]bool) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// toolLiteral is a tool name written in an expression.
type toolLiteral struct {
	name string
	loc  file.Location
}

// toolLiterals finds the tool names an expression writes: compared with
// tool.name or call.tool, or used as a key of session.tool_calls. Lint
// checks them against the registered tools.
func toolLiterals(root ast.Node) []toolLiteral {
	var out []toolLiteral
	v := &literalVisitor{out: &out}
	ast.Walk(&root, v)
	sort.SliceStable(out, func(i, j int) bool { return out[i].loc.From < out[j].loc.From })
	return out
}

type literalVisitor struct{ out *[]toolLiteral }

func (v *literalVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		var other ast.Node
		switch {
		case isToolName(n.Left):
			other = n.Right
		case isToolName(n.Right) && n.Operator == "==":
			other = n.Left
		default:
			return
		}
		switch n.Operator {
		case "==", "!=":
			if s, ok := other.(*ast.StringNode); ok {
				*v.out = append(*v.out, toolLiteral{s.Value, n.Location()})
			}
		case "in":
			if names, ok := stringSet(other); ok {
				for _, name := range sortedKeys(names) {
					*v.out = append(*v.out, toolLiteral{name, n.Location()})
				}
			}
		}
	case *ast.MemberNode:
		inner, ok := n.Node.(*ast.MemberNode)
		if !ok {
			return
		}
		id, ok := inner.Node.(*ast.IdentifierNode)
		p, ok2 := inner.Property.(*ast.StringNode)
		key, ok3 := n.Property.(*ast.StringNode)
		if ok && ok2 && ok3 && id.Value == "session" && p.Value == "tool_calls" {
			*v.out = append(*v.out, toolLiteral{key.Value, n.Location()})
		}
	}
}

// shadowPair is a rule r that rule d covers (see covers).
type shadowPair struct{ d, r *rule }

// shadowed finds every pair (d, r) of rules where shadowing(d),
// shadowable(r) and covers(d, r), ordered by d then r (file order),
// without comparing every rule with every other: a d is a candidate for r
// only when it applies to every tool, applies to r's first tool name,
// applies to patterns, or lists r's first pattern. covers then decides
// each candidate exactly as a pairwise check would.
func shadowed(rules []*rule, shadowing, shadowable func(*rule) bool) []shadowPair {
	var every, patterns []*rule    // denies for every tool; for globs (per name, unknown)
	byName := map[string][]*rule{} // denies for a finite set of names
	byGlob := map[string][]*rule{} // denies that only restrict by tools: globs, by glob
	var denies []*rule
	for _, d := range rules {
		if !shadowing(d) {
			continue
		}
		denies = append(denies, d)
		if d.globs == nil && d.scope.names == nil {
			every = append(every, d)
			continue
		}
		if names, finite := ruleNames(d); finite {
			for _, n := range names {
				if l := byName[n]; len(l) == 0 || l[len(l)-1] != d {
					byName[n] = append(l, d)
				}
			}
		} else {
			patterns = append(patterns, d)
		}
		if d.scope.names == nil && d.globs != nil {
			for _, g := range d.globs {
				if l := byGlob[g]; len(l) == 0 || l[len(l)-1] != d {
					byGlob[g] = append(l, d)
				}
			}
		}
	}
	if len(denies) == 0 {
		return nil
	}
	var out []shadowPair
	for _, r := range rules {
		if !shadowable(r) {
			continue
		}
		var cands []*rule
		names, finite := ruleNames(r)
		switch {
		case finite && len(names) == 0:
			cands = denies // covers holds vacuously: r applies to no tool
		case finite:
			cands = slices.Concat(every, byName[names[0]], patterns)
		case r.globs != nil && r.scope.names == nil:
			cands = slices.Concat(every, byGlob[r.globs[0]])
		default:
			cands = every
		}
		for _, d := range cands {
			if covers(d, r) {
				out = append(out, shadowPair{d, r})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b shadowPair) int {
		if a.d.index != b.d.index {
			return a.d.index - b.d.index
		}
		return a.r.index - b.r.index
	})
	return slices.CompactFunc(out, func(a, b shadowPair) bool { return a == b })
}
