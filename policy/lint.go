package policy

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/agentkernel/agentkernel/kernel"
)

// lint reports what compiles but cannot be right: tools that are not
// registered, rules that can never decide anything. Test coverage is
// checked after the tests run (see coverage).
func (p *Policy) lint(ps *problems) {
	if p.opts.Tools != nil {
		p.lintToolNames(ps)
	}
	p.lintUnreachable(ps)
	p.lintMemory(ps)
	p.lintDeprecated()
}

// Deprecated lists the file's uses of deprecated names, each located at
// its file:line:col with the name to write instead: turn.<field> in
// expressions (run.<field>; turn.round is run.turn, turn.max_rounds is
// run.max_turns) and turn: in test inputs (run:). They work for one more
// release; `kernel policy check` prints them.
func (p *Policy) Deprecated() []Problem { return p.deprecated }

// lintDeprecated fills p.deprecated. It reads each expression's source,
// not its compiled tree, where inlined vars carry the location of the
// v.<name> that brought them in.
func (p *Policy) lintDeprecated() {
	p.deprecated = p.deprecated[:0]
	seen := map[*program]bool{}
	check := func(pr *program) {
		if pr == nil || seen[pr] {
			return
		}
		seen[pr] = true
		for _, u := range deprecatedUses(pr.src.Src) {
			at := exprPos(p.lines, pr.src, u.offset)
			p.deprecated = append(p.deprecated, p.problem(StageDeprecated, at, pr.where,
				fmt.Sprintf("%s is deprecated: write %s", u.old, u.new)))
		}
	}
	p.eachProgram(check)
	names, at := p.testsDoc.deprecatedInputs()
	for i, name := range names {
		p.deprecated = append(p.deprecated, p.problem(StageDeprecated, at[i], "test "+quote(name),
			"input.turn is deprecated: write input.run (round is turn, max_rounds is max_turns)"))
	}
	sort.SliceStable(p.deprecated, func(i, j int) bool {
		a, b := p.deprecated[i], p.deprecated[j]
		return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
	})
}

// deprecatedUse is a deprecated name at a rune offset of an expression.
type deprecatedUse struct {
	offset   int
	old, new string
}

// deprecatedUses finds the env's deprecated names in src: turn.<field>,
// and turn used on its own.
func deprecatedUses(src string) []deprecatedUse {
	if !strings.Contains(src, "turn") {
		return nil // the common case, without parsing
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	members := map[ast.Node]bool{}
	var out []deprecatedUse
	ast.Walk(&tree.Node, visitorFunc(func(n *ast.Node) {
		m, ok := (*n).(*ast.MemberNode)
		if !ok {
			return
		}
		id, ok := m.Node.(*ast.IdentifierNode)
		if !ok || id.Value != "turn" {
			return
		}
		members[id] = true
		field := ""
		if s, ok := m.Property.(*ast.StringNode); ok {
			field = s.Value
		}
		nf := field
		if r, ok := deprecatedRunFields[field]; ok {
			nf = r
		}
		out = append(out, deprecatedUse{offset: id.Location().From, old: "turn." + field, new: "run." + nf})
	}))
	ast.Walk(&tree.Node, visitorFunc(func(n *ast.Node) {
		if id, ok := (*n).(*ast.IdentifierNode); ok && id.Value == "turn" && !members[id] {
			out = append(out, deprecatedUse{offset: id.Location().From, old: "turn", new: "run"})
		}
	}))
	sort.SliceStable(out, func(i, j int) bool { return out[i].offset < out[j].offset })
	return out
}

func (p *Policy) registered() map[string]bool {
	out := make(map[string]bool, len(p.opts.Tools))
	for _, t := range p.opts.Tools {
		out[t.Name] = true
	}
	return out
}

func (p *Policy) registeredList() string {
	names := sortedKeys(p.registered())
	if len(names) == 0 {
		return "no tools are registered"
	}
	return "registered: " + strings.Join(names, ", ")
}

func (p *Policy) lintToolNames(ps *problems) {
	reg := p.registered()
	var uses []toolUse
	unregistered := func(name string, at pos, where string) {
		uses = append(uses, toolUse{name, at, where})
		if p.opts.ToolsFrom == "" {
			ps.at(StageLint, at, where, "tool %q is not registered (%s)", name, p.registeredList())
		}
	}
	checkGlobs := func(globs []string, at pos, where string) {
		for _, g := range globs {
			if reg[g] {
				continue
			}
			if strings.ContainsAny(g, "*?[\\") {
				if !matchesAnyName(g, reg) {
					ps.at(StageLint, at, where, "tool pattern %q matches no registered tool (%s)", g, p.registeredList())
				}
				continue
			}
			unregistered(g, at, where)
		}
	}
	checkExpr := func(pr *program) {
		if pr == nil {
			return
		}
		for _, lit := range toolLiterals(pr.node()) {
			if !reg[lit.name] {
				unregistered(lit.name, exprPos(p.lines, pr.src, lit.loc.From), pr.where)
			}
		}
	}
	defer func() { p.reportUnregistered(ps, uses) }()
	// Surface sets may name tools that are not registered: a policy is
	// shared by deployments with different plugins, and a name that offers
	// nothing fails safe (the tool is not offered). Rules and drops are
	// checked, because a misspelt name there lets a call through.
	for _, d := range p.drops {
		checkGlobs(d.globs, d.at, "drop "+quote(d.id))
	}
	for _, r := range p.rules {
		checkGlobs(r.globs, r.at, "rule "+quote(r.id))
	}
	p.eachProgram(checkExpr)
}

// eachProgram calls fn with every compiled expression of the file (nil
// for an absent one): vars, select and drop conditions, rule conditions and
// messages, budget conditions and messages.
func (p *Policy) eachProgram(fn func(*program)) {
	for _, v := range p.vars {
		fn(v.prog)
	}
	for _, s := range p.selects {
		fn(s.when)
	}
	for _, d := range p.drops {
		fn(d.when)
	}
	for _, r := range p.rules {
		fn(r.when)
		fn(r.message)
	}
	for _, b := range p.budgets {
		fn(b.warn)
		fn(b.stop)
		fn(b.msg)
	}
	for _, r := range p.memRules {
		fn(r.when)
		fn(r.message)
	}
}

// toolUse is a tool name the file uses at a place.
type toolUse struct {
	name  string
	at    pos
	where string
}

// reportUnregistered records the names the file uses that are not
// registered (LoadError.Unregistered) and, when the registered tools are a
// stand-in (Options.ToolsFrom), reports them in one problem that names
// each once, with where it is used, and the way to check the file against
// the tools of its deployment: the per-use problems would only repeat that
// the stand-in lacks them.
func (p *Policy) reportUnregistered(ps *problems, uses []toolUse) {
	if len(uses) == 0 {
		return
	}
	slices.SortStableFunc(uses, func(a, b toolUse) int { return cmp.Or(a.at.Line-b.at.Line, a.at.Col-b.at.Col) })
	var names []string
	places := map[string][]string{}
	for _, u := range uses {
		if _, seen := places[u.name]; !seen {
			names = append(names, u.name)
		}
		place := strings.TrimSuffix(strings.TrimSuffix(u.where, ": when"), ": tools")
		if l := places[u.name]; len(l) == 0 || l[len(l)-1] != place {
			places[u.name] = append(l, place)
		}
	}
	ps.unregistered = names
	if p.opts.ToolsFrom == "" {
		return
	}
	var b strings.Builder
	has := "which register no tools"
	if regd := sortedKeys(p.registered()); len(regd) > 0 {
		has = "which register " + strings.Join(regd, ", ")
	}
	if len(names) == 1 {
		fmt.Fprintf(&b, "tool %s is not registered by %s (%s): ", names[0], p.opts.ToolsFrom, has)
	} else {
		fmt.Fprintf(&b, "%d tools are not registered by %s (%s): ", len(names), p.opts.ToolsFrom, has)
	}
	for i, n := range names {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", n, strings.Join(places[n], ", "))
	}
	b.WriteString(". Check the file against the configuration of the deployment that registers them: --config FILE")
	ps.at(StageLint, uses[0].at, "tools", "%s", b.String())
}

func matchesAnyName(glob string, names map[string]bool) bool {
	for n := range names {
		if matchAny([]string{glob}, n) {
			return true
		}
	}
	return false
}

func quote(s string) string { return `"` + s + `"` }

// lintUnreachable finds rules that can never change a decision: an ask or
// allow rule whose tools are all covered by an unconditional, enforced deny
// rule (deny wins whatever the order), rules whose when is false for every
// tool, and select rules after an unconditional select rule.
func (p *Policy) lintUnreachable(ps *problems) {
	for _, r := range p.rules {
		if r.when != nil && r.scope.names != nil && len(r.scope.names) == 0 {
			ps.at(StageLint, r.at, "rule "+quote(r.id), "the rule can never match: its when is false for every tool")
		}
	}
	shadowing := func(d *rule) bool {
		return !d.dryrun && d.effect == kernel.EffectDeny && d.unconditional() && !(d.when != nil && d.scope.names != nil && len(d.scope.names) == 0)
	}
	shadowable := func(r *rule) bool { return !r.dryrun && r.effect != kernel.EffectDeny }
	for _, sh := range shadowed(p.rules, shadowing, shadowable) { // indexed, not pairwise: see analyze.go
		d, r := sh.d, sh.r
		ps.at(StageLint, r.at, "rule "+quote(r.id), "unreachable: rule %q (line %d) denies every call of %s unconditionally, and deny wins", d.id, d.at.Line, describeTools(r))
	}
	for i, s := range p.selects {
		if s.when != nil {
			continue
		}
		for _, later := range p.selects[i+1:] {
			ps.at(StageLint, later.at, "select "+quote(later.id), "unreachable: select %q (line %d) has no when and always chooses its surface first", s.id, s.at.Line)
		}
		break
	}
}

// covers reports whether deny rule d applies to every tool rule r can
// apply to.
func covers(d, r *rule) bool {
	if d.globs == nil && d.scope.names == nil {
		return true // d applies to every tool
	}
	names, finite := ruleNames(r)
	if finite {
		for _, n := range names {
			if !d.appliesTo(n) {
				return false
			}
		}
		return true
	}
	// r applies to patterns: covered when d restricts nothing but the same
	// patterns.
	if r.globs == nil || d.scope.names != nil || d.globs == nil {
		return false
	}
	for _, g := range r.globs {
		if !containsString(d.globs, g) {
			return false
		}
	}
	return true
}

// ruleNames lists the tool names a rule can apply to when that set is
// finite and known.
func ruleNames(r *rule) ([]string, bool) {
	if r.scope.names != nil {
		var out []string
		for n := range r.scope.names {
			if r.globs == nil || matchAny(r.globs, n) {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out, true
	}
	if r.globs == nil {
		return nil, false
	}
	for _, g := range r.globs {
		if strings.ContainsAny(g, "*?[\\") {
			return nil, false
		}
	}
	return r.globs, true
}

func describeTools(r *rule) string {
	if names, ok := ruleNames(r); ok {
		return "the tools it applies to (" + strings.Join(names, ", ") + ")"
	}
	return "every tool it applies to"
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
