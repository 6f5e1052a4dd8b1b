package policy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// The indexes in this file keep loading a policy linear in its size. A
// test exercises one call of one tool, so it needs only the rules that can
// match that call: the rules of its tool (found by name), the rules for
// every tool or for patterns, and of those only the rules whose guard (see
// guard) can hold for the call's input. Without them every test evaluated
// every rule, and 10,000 rules with a test each took half a minute (see
// RATIONALE.md, "Policy load is linear: indexes, not pairs").

// ruleIndex finds the rules that apply to a tool name without looking at
// the others.
type ruleIndex struct {
	// byName holds the rules that apply to a finite, known set of names
	// (ruleNames), under each of those names.
	byName map[string][]*rule
	// wide holds the rules for every tool or for glob patterns; appliesTo
	// decides for each name.
	wide []*rule
}

func newRuleIndex(rules []*rule) *ruleIndex {
	x := &ruleIndex{byName: map[string][]*rule{}}
	for _, r := range rules {
		names, finite := ruleNames(r)
		if !finite {
			x.wide = append(x.wide, r)
			continue
		}
		for _, n := range names {
			if l := x.byName[n]; len(l) == 0 || l[len(l)-1] != r { // names may repeat
				x.byName[n] = append(l, r)
			}
		}
	}
	return x
}

// applicable returns the rules that apply to name, in file order.
func (x *ruleIndex) applicable(name string) []*rule {
	named := x.byName[name]
	out := make([]*rule, 0, len(named)+len(x.wide))
	i := 0
	for _, r := range x.wide {
		if !r.appliesTo(name) {
			continue
		}
		for i < len(named) && named[i].index < r.index {
			out = append(out, named[i])
			i++
		}
		out = append(out, r)
	}
	return append(out, named[i:]...)
}

// rulesFor returns the rules that apply to a tool name, in file order.
func (p *Policy) rulesFor(name string) []*rule {
	if p.rindex != nil { // set by every load
		return p.rindex.applicable(name)
	}
	var out []*rule
	for _, r := range p.rules {
		if r.appliesTo(name) {
			out = append(out, r)
		}
	}
	return out
}

// guard is a condition that must hold before a rule's when can be true
// or fail: subject == value, where subject is a field path of the
// environment (call.args.ticket, session.labels.team, tool.tier) and value
// a constant, and where nothing the when evaluates before it can fail.
// When the subject's value in a test's input is known and differs, the
// rule evaluates to false without error, so the test need not run it.
//
// A prefix guard is the other kind: any(call.paths, {# startsWith "p"}) or
// call.command startsWith "p" (typed strings, so startsWith cannot fail):
// the test runs the rule only when one of the call's paths (its command)
// starts with the prefix.
type guard struct {
	subject string // the path as an expression: call["args"]["ticket"]
	value   any    // normalised with indexKey; the prefix for a prefix guard
	prefix  string // "paths" or "command" for a prefix guard, else ""
}

// findGuard returns the guard of a rule's when, if it has one: the first
// subject == constant among its top-level conjuncts (&&), provided that
// the conjuncts evaluated before it only test the tool's name (which
// cannot fail).
func findGuard(n ast.Node) (guard, bool) {
	var conj []ast.Node
	flattenAnd(n, &conj)
	for _, c := range conj {
		if g, ok := guardOf(c); ok {
			return g, true
		}
		if g, ok := prefixGuardOf(c); ok {
			return g, true
		}
		if s := analyze(c); s.names == nil || s.rest {
			return guard{}, false // may fail: stop
		}
	}
	return guard{}, false
}

func flattenAnd(n ast.Node, out *[]ast.Node) {
	if b, ok := n.(*ast.BinaryNode); ok && (b.Operator == "&&" || b.Operator == "and") {
		flattenAnd(b.Left, out)
		flattenAnd(b.Right, out)
		return
	}
	*out = append(*out, n)
}

func guardOf(n ast.Node) (guard, bool) {
	b, ok := n.(*ast.BinaryNode)
	if !ok || b.Operator != "==" {
		return guard{}, false
	}
	for _, side := range [2][2]ast.Node{{b.Left, b.Right}, {b.Right, b.Left}} {
		subj, ok := subjectPath(side[0])
		if !ok {
			continue
		}
		if v, ok := literal(side[1]); ok {
			return guard{subject: subj, value: v}, true
		}
	}
	return guard{}, false
}

func prefixGuardOf(n ast.Node) (guard, bool) {
	switch n := n.(type) {
	case *ast.BuiltinNode: // any(call.paths, {# startsWith "p"})
		if n.Name != "any" || len(n.Arguments) != 2 {
			return guard{}, false
		}
		if s, ok := subjectPath(n.Arguments[0]); !ok || s != `call["paths"]` {
			return guard{}, false
		}
		pred, ok := n.Arguments[1].(*ast.PredicateNode)
		if !ok {
			return guard{}, false
		}
		b, ok := pred.Node.(*ast.BinaryNode)
		if !ok || b.Operator != "startsWith" {
			return guard{}, false
		}
		if ptr, ok := b.Left.(*ast.PointerNode); !ok || ptr.Name != "" {
			return guard{}, false
		}
		if lit, ok := b.Right.(*ast.StringNode); ok {
			return guard{prefix: "paths", value: lit.Value}, true
		}
	case *ast.BinaryNode: // call.command startsWith "p"
		if n.Operator != "startsWith" {
			return guard{}, false
		}
		if s, ok := subjectPath(n.Left); !ok || s != `call["command"]` {
			return guard{}, false
		}
		if lit, ok := n.Right.(*ast.StringNode); ok {
			return guard{prefix: "command", value: lit.Value}, true
		}
	}
	return guard{}, false
}

// subjectPath renders a plain member chain from a root of the environment
// (session, turn, tool, call, context) with constant string keys, e.g.
// call.args.ticket as call["args"]["ticket"]. Anything else (optional
// chaining, computed keys, indexes, calls) is not a subject.
func subjectPath(n ast.Node) (string, bool) {
	var keys []string
	for {
		switch m := n.(type) {
		case *ast.MemberNode:
			p, ok := m.Property.(*ast.StringNode)
			if !ok || m.Optional || m.Method {
				return "", false
			}
			keys = append(keys, p.Value)
			n = m.Node
			continue
		case *ast.IdentifierNode:
			switch m.Value {
			case "session", "turn", "tool", "call", "context":
			default:
				return "", false
			}
			if len(keys) == 0 {
				return "", false
			}
			var b strings.Builder
			b.WriteString(m.Value)
			for i := len(keys) - 1; i >= 0; i-- {
				b.WriteString("[" + strconv.Quote(keys[i]) + "]")
			}
			return b.String(), true
		}
		return "", false
	}
}

// literal reads a constant a guard compares with, normalised.
func literal(n ast.Node) (any, bool) {
	switch n := n.(type) {
	case *ast.StringNode:
		return n.Value, true
	case *ast.IntegerNode:
		return float64(n.Value), true
	case *ast.FloatNode:
		return n.Value, true
	case *ast.BoolNode:
		return n.Value, true
	case *ast.ConstantNode:
		return indexKey(n.Value)
	}
	return nil, false
}

// nilKey is the key of a missing value (call.args.x when the call has no
// x): expr's == finds it equal to no constant a guard can hold.
type nilKey struct{}

// indexKey normalises a value the way expr's == compares it: strings and
// booleans as themselves, int and float64 as float64 (expr compares an int
// with a float64 as float64), nil as nilKey. Other types are not indexed:
// a test whose subject has one runs every rule guarded on that subject.
func indexKey(v any) (any, bool) {
	switch v := v.(type) {
	case nil:
		return nilKey{}, true
	case string, bool:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return nil, false
}

// testIndex finds, for one test's call, the rules that can match it. It
// is built for one run of the tests.
type testIndex struct {
	subjects []*subjectProg
	subjIdx  map[string]int
	// buckets holds the guarded rules under (tool, subject, value), the
	// tool being "" for wide rules; unguarded the others under their tool
	// ("" again for wide rules); all every guarded rule under (tool,
	// subject), for a subject whose value is not known.
	buckets   map[bucketKey][]*rule
	all       map[bucketKey][]*rule
	unguarded map[string][]*rule
	// subjectsOf lists the subjects guarding the rules of a tool ("": of
	// wide rules).
	subjectsOf map[string][]int
	// prefixes has bit 1 (paths) and 2 (command) set for a tool whose
	// rules have prefix guards; their buckets' subject is prefixPaths or
	// prefixCommand and their value the prefix.
	prefixes map[string]int
}

const (
	prefixPaths   = -1
	prefixCommand = -2
)

type bucketKey struct {
	tool    string
	subject int
	value   any
}

type subjectProg struct {
	prog *vm.Program // nil: the path did not compile; its rules always run
	// value and known are the subject's value for the current test.
	value any
	known bool
	epoch int
}

func (p *Policy) newTestIndex() *testIndex {
	x := &testIndex{
		subjIdx: map[string]int{}, buckets: map[bucketKey][]*rule{},
		all: map[bucketKey][]*rule{}, unguarded: map[string][]*rule{}, subjectsOf: map[string][]int{},
		prefixes: map[string]int{},
	}
	for _, r := range p.rules {
		tools := []string{""}
		if names, finite := ruleNames(r); finite {
			tools = slices.Compact(slices.Sorted(slices.Values(names)))
		}
		g, ok := guard{}, false
		if r.when != nil {
			g, ok = findGuard(r.when.prog.Node())
		}
		if !ok {
			for _, t := range tools {
				x.unguarded[t] = append(x.unguarded[t], r)
			}
			continue
		}
		if g.prefix != "" {
			s := prefixPaths
			if g.prefix == "command" {
				s = prefixCommand
			}
			for _, t := range tools {
				k := bucketKey{tool: t, subject: s, value: g.value}
				x.buckets[k] = append(x.buckets[k], r)
				x.prefixes[t] |= 1 << -s
			}
			continue
		}
		s, seen := x.subjIdx[g.subject]
		if !seen {
			s = len(x.subjects)
			x.subjIdx[g.subject] = s
			sp := &subjectProg{}
			if prog, err := expr.Compile(g.subject, expr.Env(exprEnv)); err == nil {
				sp.prog = prog
			}
			x.subjects = append(x.subjects, sp)
		}
		for _, t := range tools {
			k := bucketKey{tool: t, subject: s, value: g.value}
			x.buckets[k] = append(x.buckets[k], r)
			ka := bucketKey{tool: t, subject: s}
			if len(x.all[ka]) == 0 {
				x.subjectsOf[t] = append(x.subjectsOf[t], s)
			}
			x.all[ka] = append(x.all[ka], r)
		}
	}
	return x
}

// candidates returns the rules that apply to tool and whose guard does
// not rule them out for env, in file order. epoch is a number that
// changes from one test to the next (subject values are cached per test).
func (x *testIndex) candidates(m *vm.VM, env *Env, tool string, epoch int) []*rule {
	var out []*rule
	for _, t := range [2]string{tool, ""} {
		add := func(rs []*rule) {
			for _, r := range rs {
				if t != "" || r.appliesTo(tool) {
					out = append(out, r)
				}
			}
		}
		add(x.unguarded[t])
		for _, s := range x.subjectsOf[t] {
			sp := x.subjects[s]
			if sp.epoch != epoch {
				sp.epoch, sp.known = epoch, false
				if sp.prog != nil {
					if v, err := m.Run(sp.prog, env); err == nil {
						sp.value, sp.known = indexKey(v)
					}
				}
			}
			if !sp.known {
				add(x.all[bucketKey{tool: t, subject: s}])
				continue
			}
			add(x.buckets[bucketKey{tool: t, subject: s, value: sp.value}])
		}
		if bits := x.prefixes[t]; bits != 0 {
			byPrefix := func(subject int, strs []string) {
				for _, str := range strs {
					for i := 0; i <= len(str); i++ {
						add(x.buckets[bucketKey{tool: t, subject: subject, value: str[:i]}])
					}
				}
			}
			if bits&(1<<-prefixPaths) != 0 {
				byPrefix(prefixPaths, env.Call.Paths)
			}
			if bits&(1<<-prefixCommand) != 0 {
				byPrefix(prefixCommand, []string{env.Call.Command})
			}
		}
	}
	slices.SortFunc(out, func(a, b *rule) int { return a.index - b.index })
	return slices.Compact(out) // a rule may come from several paths
}

// entryOf groups rules (in file order) the way Decide evaluates them.
func entryOf(rules []*rule) *toolEntry {
	e := &toolEntry{}
	for _, r := range rules {
		switch {
		case r.dryrun:
			e.dryrun = append(e.dryrun, r)
		case r.effect == kernel.EffectDeny:
			e.deny = append(e.deny, r)
		case r.effect == kernel.EffectAsk:
			e.ask = append(e.ask, r)
		default:
			e.allow = append(e.allow, r)
		}
	}
	return e
}
