package policy

import (
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// The index in this file keeps loading a policy linear in its size and a
// decision proportional to the rules that can match the call. A test or a
// call exercises one call of one tool, so it needs only the rules that can
// match that call: the rules of its tool (found by name), the rules for
// every tool or for patterns, and of those only the rules whose guard (see
// guard) can hold for the call. Without it every test evaluated every
// rule, and 10,000 rules with a test each took half a minute (see
// RATIONALE.md, "Policy load is linear: indexes, not pairs", and "One rule
// index for tests and decisions").

// ruleIndex finds the rules that apply to a tool name without looking at
// the others, and, among them, the rules whose guard can hold for a call.
// It is built once per load and never changes: tests running in parallel
// and concurrent decisions share it.
type ruleIndex struct {
	// byName holds the rules that apply to a finite, known set of names
	// (ruleNames), under each of those names.
	byName map[string][]*rule
	// wide holds the rules for every tool or for glob patterns; appliesTo
	// decides for each name.
	wide []*rule
	// subjects are the guards' subjects, compiled; guards refer to them by
	// index. A nil program did not compile: its rules always run.
	subjects []*vm.Program
	// tables holds the rules by tool ("" for wide rules), split by guard.
	tables map[string]*guardTables
}

// guardTables are the rules of one tool name (or the wide rules), split
// by their guard.
type guardTables struct {
	unguarded []*rule
	tabs      []*guardTable
}

// guardTable holds the rules guarded on one subject, by one kind of guard.
type guardTable struct {
	subject int  // index into ruleIndex.subjects; -1: the call's paths
	prefix  bool // a prefix table (startsWith, matches "^lit"); else values
	// byValue holds the rules under each value (== and in guards, keyed by
	// indexKey) or each prefix.
	byValue map[any][]*rule
	// inRules are the in-guarded rules of a value table: they run when the
	// subject's value is known but not a string (in compares it with
	// strings only; see guardIn).
	inRules []*rule
	// all is every rule of the table, for a subject whose value is not
	// known (it failed, or has a type the table cannot look up).
	all []*rule
	// lens are the distinct prefix lengths of a prefix table, ascending.
	lens []int
}

func newRuleIndex(rules []*rule) *ruleIndex {
	x := &ruleIndex{byName: map[string][]*rule{}, tables: map[string]*guardTables{}}
	subjIdx := map[string]int{}
	tabIdx := map[tableKey]*guardTable{}
	for _, r := range rules {
		names, finite := ruleNames(r)
		tools := []string{""}
		if finite {
			tools = slices.Compact(slices.Sorted(slices.Values(names)))
			for _, n := range tools {
				x.byName[n] = append(x.byName[n], r)
			}
		} else {
			x.wide = append(x.wide, r)
		}
		g, ok := r.guard, r.guarded
		s := -1
		if ok && g.kind != guardPaths {
			var seen bool
			if s, seen = subjIdx[g.subject]; !seen {
				s = len(x.subjects)
				subjIdx[g.subject] = s
				prog, err := expr.Compile(g.subject, expr.Env(exprEnv))
				if err != nil {
					prog = nil
				}
				x.subjects = append(x.subjects, prog)
			}
		}
		for _, t := range tools {
			gt := x.tables[t]
			if gt == nil {
				gt = &guardTables{}
				x.tables[t] = gt
			}
			if !ok {
				gt.unguarded = append(gt.unguarded, r)
				continue
			}
			k := tableKey{tool: t, subject: s, prefix: g.kind == guardPrefix || g.kind == guardPaths}
			tab := tabIdx[k]
			if tab == nil {
				tab = &guardTable{subject: s, prefix: k.prefix, byValue: map[any][]*rule{}}
				tabIdx[k] = tab
				gt.tabs = append(gt.tabs, tab)
			}
			tab.add(g, r)
		}
	}
	for _, gt := range x.tables {
		for _, tab := range gt.tabs {
			slices.Sort(tab.lens)
			tab.lens = slices.Compact(tab.lens)
		}
	}
	return x
}

type tableKey struct {
	tool    string
	subject int
	prefix  bool
}

func (tab *guardTable) add(g guard, r *rule) {
	tab.all = append(tab.all, r)
	if g.kind == guardIn {
		tab.inRules = append(tab.inRules, r)
	}
	for _, v := range g.values {
		if l := tab.byValue[v]; len(l) == 0 || l[len(l)-1] != r { // in [a, a]
			tab.byValue[v] = append(l, r)
		}
		if tab.prefix {
			tab.lens = append(tab.lens, len(v.(string)))
		}
	}
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

// entryIndex is the index's view of one tool name: the rules that apply
// to it without a guard, and the guard tables of its own rules and of the
// wide rules (whose hits are checked with appliesTo).
type entryIndex struct {
	name        string
	unguarded   []*rule // in file order
	named, wide []*guardTable
}

// newEntryIndex returns the index of one tool name, or nil when no rule
// that applies to it has a guard (every applicable rule then runs).
func (x *ruleIndex) newEntryIndex(name string) *entryIndex {
	named, wide := x.tables[name], x.tables[""]
	e := &entryIndex{name: name}
	if named != nil {
		e.named = named.tabs
	}
	if wide != nil {
		for _, tab := range wide.tabs {
			if slices.ContainsFunc(tab.all, func(r *rule) bool { return r.appliesTo(name) }) {
				e.wide = append(e.wide, tab)
			}
		}
	}
	if len(e.named) == 0 && len(e.wide) == 0 {
		return nil
	}
	var own, every []*rule
	if named != nil {
		own = named.unguarded
	}
	if wide != nil {
		for _, r := range wide.unguarded {
			if r.appliesTo(name) {
				every = append(every, r)
			}
		}
	}
	e.unguarded = mergeRules(nil, own, every)
	return e
}

// mergeRules appends the union of a and b, both in file order, to out.
func mergeRules(out, a, b []*rule) []*rule {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].index < b[j].index:
			out = append(out, a[i])
			i++
		case a[i].index > b[j].index:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// probe is the scratch space of one evaluation of the index (one decision,
// or one test): the subjects' values, worked out once each, and the
// candidate rules. A probe is used by one goroutine at a time.
type probe struct {
	vals   []probedValue
	hits   []*rule
	cands  []*rule
	groups ruleGroups
}

type probedValue struct {
	subject int
	value   any
	ok      bool
}

var probePool = sync.Pool{New: func() any { return new(probe) }}

// value returns the value of subject s for env, and whether it is known
// (the subject evaluated without error).
func (pr *probe) value(x *ruleIndex, m *vm.VM, env *Env, s int) (any, bool) {
	for _, v := range pr.vals {
		if v.subject == s {
			return v.value, v.ok
		}
	}
	pv := probedValue{subject: s}
	if prog := x.subjects[s]; prog != nil {
		if v, err := runVM(m, prog, env); err == nil { // m may be nil: see runVM
			pv.value, pv.ok = v, true
		}
	}
	pr.vals = append(pr.vals, pv)
	return pv.value, pv.ok
}

// candidates returns the rules that apply to the entry's tool and whose
// guard does not rule them out for env, in file order. The slice is the
// probe's: it is valid until the probe is used again.
func (e *entryIndex) candidates(x *ruleIndex, m *vm.VM, env *Env, pr *probe) []*rule {
	pr.vals, pr.hits = pr.vals[:0], pr.hits[:0]
	for _, tab := range e.named {
		pr.hits = tab.lookup(x, m, env, pr, pr.hits)
	}
	if len(e.wide) > 0 {
		n := len(pr.hits)
		for _, tab := range e.wide {
			pr.hits = tab.lookup(x, m, env, pr, pr.hits)
		}
		kept := pr.hits[:n]
		for _, r := range pr.hits[n:] {
			if r.appliesTo(e.name) {
				kept = append(kept, r)
			}
		}
		pr.hits = kept
	}
	slices.SortFunc(pr.hits, func(a, b *rule) int { return a.index - b.index })
	pr.hits = slices.Compact(pr.hits) // the call's paths may hit a rule twice
	pr.cands = mergeRules(pr.cands[:0], e.unguarded, pr.hits)
	return pr.cands
}

// lookup appends the table's rules that env's subject value lets through.
func (tab *guardTable) lookup(x *ruleIndex, m *vm.VM, env *Env, pr *probe, out []*rule) []*rule {
	if tab.subject < 0 { // any(call.paths, {# startsWith "p"}): typed, never fails
		for _, p := range env.Call.Paths {
			out = tab.prefixes(p, out)
		}
		return out
	}
	v, ok := pr.value(x, m, env, tab.subject)
	if !ok {
		return append(out, tab.all...)
	}
	if tab.prefix {
		s, isString := v.(string)
		if !isString {
			return append(out, tab.all...) // startsWith and matches fail: the rule must run
		}
		return tab.prefixes(s, out)
	}
	if _, isString := v.(string); !isString {
		out = append(out, tab.inRules...)
	}
	if k, known := indexKey(v); known {
		return append(out, tab.byValue[k]...)
	}
	return append(out, tab.all...)
}

// prefixes appends the rules of a prefix table whose prefix s starts with.
func (tab *guardTable) prefixes(s string, out []*rule) []*rule {
	for _, n := range tab.lens {
		if n > len(s) {
			break
		}
		out = append(out, tab.byValue[s[:n]]...)
	}
	return out
}

// guardKind is the kind of condition a guard is.
type guardKind uint8

const (
	// guardEq is subject == constant: the rule can match only when the
	// subject's value equals the constant (compared as expr's == does,
	// see indexKey).
	guardEq guardKind = iota
	// guardIn is subject in ["a", "b"]: the rule can match only when the
	// subject's value is one of the strings, or is not a string at all
	// (expr's in then compares differently, or fails).
	guardIn
	// guardPrefix is subject startsWith "p", or subject matches a regular
	// expression anchored at the start with a literal prefix ("^p…"): the
	// rule can match only when the subject is a string with that prefix,
	// or is not a string (startsWith and matches then fail).
	guardPrefix
	// guardPaths is any(call.paths, {# startsWith "p"}): one of the call's
	// paths (a typed list of strings, so it cannot fail) has the prefix.
	guardPaths
)

// guard is a condition that must hold before a rule's when can be true
// or fail, where nothing the when evaluates before it can fail: when the
// guard's subject has a value that rules it out, the rule evaluates to
// false without error, so it need not run. The subject is a field path of
// the environment (call.args.ticket, session.labels.team, tool.tier,
// call.command) rendered as an expression, call["args"]["ticket"].
type guard struct {
	kind    guardKind
	subject string
	// values are the constants (normalised with indexKey) of guardEq and
	// guardIn, the prefix of guardPrefix and guardPaths.
	values []any
}

// findGuard returns the guard of a rule's when, if it has one: the first
// guard among its top-level conjuncts (&&), provided that the conjuncts
// evaluated before it only test the tool's name (which cannot fail, and
// the name index already uses).
func findGuard(n ast.Node) (guard, bool) {
	var conj []ast.Node
	flattenAnd(n, &conj)
	for _, c := range conj {
		if s := analyze(c); s.names != nil && !s.rest {
			continue // a tool-name test: indexed by name
		}
		if g, ok := guardOf(c); ok {
			return g, true
		}
		return guard{}, false // may fail: stop
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

// guardOf reads one conjunct as a guard.
func guardOf(n ast.Node) (guard, bool) {
	switch n := n.(type) {
	case *ast.BuiltinNode:
		return pathsGuardOf(n)
	case *ast.BinaryNode:
		switch n.Operator {
		case "==":
			for _, side := range [2][2]ast.Node{{n.Left, n.Right}, {n.Right, n.Left}} {
				subj, ok := subjectPath(side[0])
				if !ok {
					continue
				}
				if v, ok := literal(side[1]); ok {
					return guard{kind: guardEq, subject: subj, values: []any{v}}, true
				}
			}
		case "in":
			subj, ok := subjectPath(n.Left)
			if !ok {
				return guard{}, false
			}
			set, ok := stringSet(n.Right)
			if !ok {
				return guard{}, false
			}
			vals := make([]any, 0, len(set))
			for _, s := range sortedKeys(set) {
				vals = append(vals, s)
			}
			return guard{kind: guardIn, subject: subj, values: vals}, true
		case "startsWith", "matches":
			subj, ok := subjectPath(n.Left)
			if !ok {
				return guard{}, false
			}
			lit, ok := n.Right.(*ast.StringNode)
			if !ok {
				return guard{}, false
			}
			prefix := lit.Value
			if n.Operator == "matches" {
				if prefix, ok = regexPrefix(lit.Value); !ok {
					return guard{}, false
				}
			}
			return guard{kind: guardPrefix, subject: subj, values: []any{prefix}}, true
		}
	}
	return guard{}, false
}

// pathsGuardOf reads any(call.paths, {# startsWith "p"}).
func pathsGuardOf(n *ast.BuiltinNode) (guard, bool) {
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
	lit, ok := b.Right.(*ast.StringNode)
	if !ok {
		return guard{}, false
	}
	return guard{kind: guardPaths, values: []any{lit.Value}}, true
}

// regexPrefix returns the literal text a regular expression requires at
// the start of the string: "tool" for ^tool( |$), "git push" for
// \Agit push\b. ok is false when the expression is not anchored at the
// start of the text (^ in (?m) mode anchors at every line), starts with
// something other than a case-sensitive literal, or when its literal
// could match an invalid UTF-8 byte (RE2 reads one as U+FFFD).
func regexPrefix(pattern string) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	var seq []*syntax.Regexp
	var flatten func(re *syntax.Regexp) bool // false: stop at re
	flatten = func(re *syntax.Regexp) bool {
		switch re.Op {
		case syntax.OpConcat:
			for _, s := range re.Sub {
				if !flatten(s) {
					return false
				}
			}
			return true
		case syntax.OpCapture:
			return flatten(re.Sub[0])
		}
		seq = append(seq, re)
		return re.Op == syntax.OpBeginText || re.Op == syntax.OpLiteral && re.Flags&syntax.FoldCase == 0
	}
	flatten(re)
	if len(seq) == 0 || seq[0].Op != syntax.OpBeginText {
		return "", false
	}
	var b strings.Builder
	for _, s := range seq[1:] {
		if s.Op != syntax.OpLiteral || s.Flags&syntax.FoldCase != 0 {
			break
		}
		for _, r := range s.Rune {
			if r == utf8.RuneError || !utf8.ValidRune(r) {
				return "", false
			}
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "", false
	}
	return b.String(), true
}

// subjectPath renders a plain member chain from a root of the environment
// (session, run, turn, tool, call, context) with constant string keys,
// e.g. call.args.ticket as call["args"]["ticket"]. Anything else
// (optional chaining, computed keys, indexes, calls) is not a subject.
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
			case "session", "run", "turn", "tool", "call", "context", "agent":
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
// a call whose subject has one runs every rule guarded on that subject.
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

// ruleGroups are rules (in file order) grouped the way a decision
// evaluates them.
type ruleGroups struct {
	dryrun, deny, ask, allow []*rule
}

// groupRules groups rules into g, reusing its slices.
func groupRules(g *ruleGroups, rules []*rule) {
	g.dryrun, g.deny, g.ask, g.allow = g.dryrun[:0], g.deny[:0], g.ask[:0], g.allow[:0]
	for _, r := range rules {
		switch {
		case r.dryrun:
			g.dryrun = append(g.dryrun, r)
		case r.effect == kernel.EffectDeny:
			g.deny = append(g.deny, r)
		case r.effect == kernel.EffectAsk:
			g.ask = append(g.ask, r)
		default:
			g.allow = append(g.allow, r)
		}
	}
}
