package policy

import (
	"sort"
	"strings"

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
			ps.at(StageLint, at, where, "tool %q is not registered (%s)", g, p.registeredList())
		}
	}
	checkExpr := func(pr *program) {
		if pr == nil {
			return
		}
		for _, lit := range toolLiterals(pr.prog.Node()) {
			if !reg[lit.name] {
				ps.at(StageLint, exprPos(p.lines, pr.src, lit.loc.From), pr.where, "tool %q is not registered (%s)", lit.name, p.registeredList())
			}
		}
	}
	// Surface sets may name tools that are not registered: a policy is
	// shared by deployments with different plugins, and a name that offers
	// nothing fails safe (the tool is not offered). Rules and drops are
	// checked, because a misspelt name there lets a call through.
	for _, s := range p.selects {
		checkExpr(s.when)
	}
	for _, d := range p.drops {
		checkGlobs(d.globs, d.at, "drop "+quote(d.id))
		checkExpr(d.when)
	}
	for _, r := range p.rules {
		checkGlobs(r.globs, r.at, "rule "+quote(r.id))
		checkExpr(r.when)
		checkExpr(r.message)
	}
	for _, v := range p.vars {
		checkExpr(v.prog)
	}
	for _, b := range p.budgets {
		checkExpr(b.warn)
		checkExpr(b.stop)
		checkExpr(b.msg)
	}
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
