package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// build compiles a parsed file into a Policy, reporting compile and lint
// problems (except test coverage, which needs the tests run).
func build(ps *problems, doc *fileDoc, src []byte, opts Options) *Policy {
	p := &Policy{
		name: doc.Name.V, revision: doc.Revision.V, sha: sha256Hex(src), file: ps.file,
		lines: ps.lines, opts: opts, specs: newSpecSet(opts.Tools), defSet: -1, setIdx: map[string]int{},
		testsDoc: doc.Tests,
	}
	if !doc.Name.Set || strings.TrimSpace(doc.Name.V) == "" {
		ps.add(StageSyntax, 0, 0, "", "name is required")
	}
	if !doc.Revision.Set || strings.TrimSpace(doc.Revision.V) == "" {
		ps.add(StageSyntax, 0, 0, "", "revision is required (any string that changes with the file, e.g. \"2026-11-22.1\")")
	}
	switch doc.Defaults.ToolCall.V {
	case "allow", "ask", "deny":
		p.defEffect = kernel.Effect(doc.Defaults.ToolCall.V)
	case "":
		ps.add(StageSyntax, 0, 0, "", "defaults.tool_call is required: allow, ask or deny (what happens when no rule matches)")
	default:
		ps.at(StageSyntax, doc.Defaults.ToolCall.At, "defaults.tool_call", "must be allow, ask or deny, got %q", doc.Defaults.ToolCall.V)
	}
	switch doc.Defaults.Ask.V {
	case "", "ask":
	case "deny":
		p.askDeny = true
	default:
		ps.at(StageSyntax, doc.Defaults.Ask.At, "defaults.ask", "must be ask or deny, got %q", doc.Defaults.Ask.V)
	}

	c := newCompiler(ps, doc)
	p.comp = c
	for i, v := range doc.Vars {
		where := "vars." + v.Name.V
		if !v.Expr.Set {
			ps.at(StageSyntax, v.Name.At, where, "a var needs an expression")
			continue
		}
		p.vars = append(p.vars, &varDef{name: v.Name.V, at: v.Name.At, prog: c.compile(v.Expr, where, wantAny, i)})
	}

	ids := &idRegistry{ps: ps, seen: map[string]pos{}}
	p.buildSurfaces(ps, c, doc.Surfaces, ids)

	var jobs []compileJob // the rules' expressions, compiled in parallel
	for i, rd := range doc.Rules {
		where, ok := ids.require("rules", i, "rule", rd.ID, rd.At)
		if !ok {
			continue
		}
		r := &rule{id: rd.ID.V, at: rd.ID.At, index: len(p.rules)}
		switch rd.Effect.V {
		case "deny", "ask", "allow":
			r.effect = kernel.Effect(rd.Effect.V)
		case "":
			ps.at(StageSyntax, rd.ID.At, where, "effect is required: deny, ask or allow")
		default:
			ps.at(StageSyntax, rd.Effect.At, where, "effect must be deny, ask or allow, got %q", rd.Effect.V)
		}
		switch rd.Mode.V {
		case "", "enforce":
		case "dryrun":
			r.dryrun = true
			if r.effect == kernel.EffectAllow {
				ps.at(StageSyntax, rd.Mode.At, where, "mode: dryrun applies to deny and ask rules; an allow rule has nothing to report")
			}
		default:
			ps.at(StageSyntax, rd.Mode.At, where, "mode must be enforce or dryrun, got %q", rd.Mode.V)
		}
		if rd.Tools != nil {
			r.globs = p.globs(ps, rd.Tools, where+": tools")
			if len(rd.Tools) == 0 {
				ps.at(StageSyntax, rd.ID.At, where, "tools: is empty, so the rule applies to no tool; remove tools: to apply it to every tool")
			}
		}
		if rd.When.Set {
			jobs = append(jobs, compileJob{&r.when, rd.When, where + ": when", wantBool})
		}
		if rd.Message.Set {
			jobs = append(jobs, compileJob{&r.message, rd.Message, where + ": message", wantString})
		}
		p.rules = append(p.rules, r)
	}
	c.compileAll(jobs, len(doc.Vars))
	for _, r := range p.rules {
		if r.when != nil {
			n := r.when.node()
			r.scope = analyze(n)
			r.guard, r.guarded = findGuard(n)
		}
	}

	for i, bd := range doc.Budgets {
		where, ok := ids.require("budgets", i, "budget", bd.ID, bd.At)
		if !ok {
			continue
		}
		if bd.ID.V == "none" {
			ps.at(StageSyntax, bd.ID.At, where, `"none" is reserved (a test's stop: none means no budget stops)`)
		}
		b := &budgetDef{id: bd.ID.V, at: bd.ID.At, wrapUp: bd.WrapUp}
		if !bd.WarnWhen.Set && !bd.StopWhen.Set {
			ps.at(StageSyntax, bd.ID.At, where, "a budget needs warn_when, stop_when or both")
		}
		if bd.WarnWhen.Set {
			b.warn = c.compile(bd.WarnWhen, where+": warn_when", wantBool, len(doc.Vars))
		}
		if bd.StopWhen.Set {
			b.stop = c.compile(bd.StopWhen, where+": stop_when", wantBool, len(doc.Vars))
		}
		if bd.Message.Set {
			b.msg = c.compile(bd.Message, where+": message", wantString, len(doc.Vars))
		}
		if bd.WrapUp && !bd.StopWhen.Set {
			ps.at(StageSyntax, bd.ID.At, where, "wrap_up needs a stop_when")
		}
		p.budgets = append(p.budgets, b)
	}
	p.buildMemory(ps, c, doc.Memory, ids)
	if ps.ctx != nil && ps.ctx.Err() != nil {
		return p // cancelled: the caller reports that, not what is left
	}
	p.lint(ps)
	return p
}

// loadTests decodes the tests: section into p.tests and checks its shape,
// once; the problems go to ps (when not nil) every time. Compile calls it
// with the rest of the file; Load only when the tests must run or the file
// has other problems, so a load the test cache vouches for never decodes
// the tests (they are a large part of a generated file).
func (p *Policy) loadTests(ps *problems) {
	p.testsOnce.Do(func() {
		local := &problems{file: p.file, lines: p.lines, ctx: nil}
		if p.snapshotSrc != nil {
			if doc := parseFile(local, p.snapshotSrc); doc != nil {
				p.testsDoc = doc.Tests
			}
		}
		if p.testsDoc.node != nil {
			(&ydec{ps: local}).decode(p.testsDoc.node, reflectValue(&p.tests), p.testsDoc.where)
		}
		p.checkTests(local)
		p.testProblems = local.list
	})
	if ps != nil {
		ps.list = append(ps.list, p.testProblems...)
	}
}

func (p *Policy) buildSurfaces(ps *problems, c *compiler, sd *surfacesDoc, ids *idRegistry) {
	if sd == nil {
		return
	}
	p.hasSurfaces = true
	for _, s := range sd.Sets {
		where := "surfaces.sets." + s.Name.V
		set := &surfaceSet{name: s.Name.V, at: s.Name.At, exact: map[string]bool{}}
		for _, g := range p.globs(ps, s.Tools, where) {
			if strings.ContainsAny(g, "*?[\\") {
				set.globs = append(set.globs, g)
			} else {
				set.exact[g] = true
			}
		}
		p.setIdx[s.Name.V] = len(p.sets)
		p.sets = append(p.sets, set)
	}
	setRef := func(name str, where string) int {
		i, ok := p.setIdx[name.V]
		if !ok {
			ps.at(StageCompile, name.At, where, "unknown surface set %q (%s)", name.V, p.setNames())
			return -1
		}
		return i
	}
	if sd.Default.Set {
		p.defSet = setRef(sd.Default, "surfaces.default")
	}
	for i, s := range sd.Select {
		where := fmt.Sprintf("surfaces.select[%d]", i)
		id := s.ID.V
		if s.ID.Set {
			where = fmt.Sprintf("select %q", id)
			ids.claim(s.ID, where)
		} else {
			id = where
		}
		sel := &selectRule{id: id, at: s.At, set: -1}
		if s.ID.Set {
			sel.at = s.ID.At
		}
		if !s.Surface.Set {
			ps.at(StageSyntax, sel.at, where, "surface is required: the name of a set in surfaces.sets")
		} else {
			sel.set = setRef(s.Surface, where)
		}
		if s.When.Set {
			sel.when = c.compile(s.When, where+": when", wantBool, len(c.vars))
		}
		p.selects = append(p.selects, sel)
	}
	for i, d := range sd.Drop {
		where, ok := ids.require("surfaces.drop", i, "drop", d.ID, d.At)
		if !ok {
			continue
		}
		dr := &dropRule{id: d.ID.V, at: d.ID.At}
		if len(d.Tools) == 0 {
			ps.at(StageSyntax, d.ID.At, where, "tools is required: the tools (names or globs) this rule may drop")
		}
		dr.globs = p.globs(ps, d.Tools, where+": tools")
		if d.When.Set {
			dr.when = c.compile(d.When, where+": when", wantBool, len(c.vars))
		}
		p.drops = append(p.drops, dr)
	}
}

func (p *Policy) setNames() string {
	if len(p.sets) == 0 {
		return "surfaces.sets is empty"
	}
	names := make([]string, len(p.sets))
	for i, s := range p.sets {
		names[i] = s.name
	}
	return "sets: " + strings.Join(names, ", ")
}

// globs checks tool names and globs (path.Match syntax).
func (p *Policy) globs(ps *problems, in []str, where string) []string {
	out := make([]string, 0, len(in))
	for _, g := range in {
		if strings.TrimSpace(g.V) == "" {
			ps.at(StageSyntax, g.At, where, "empty tool name")
			continue
		}
		if _, err := path.Match(g.V, ""); err != nil {
			ps.at(StageSyntax, g.At, where, "bad glob %q: %v", g.V, err)
			continue
		}
		out = append(out, g.V)
	}
	return out
}

// checkTests validates the tests' shape: names, expectations, and the ids
// and names they refer to.
func (p *Policy) checkTests(ps *problems) {
	names := map[string]int{}
	ruleIDs := map[string]bool{}
	for _, r := range p.rules {
		ruleIDs[r.id] = true
	}
	budgetIDs := map[string]bool{}
	for _, b := range p.budgets {
		budgetIDs[b.id] = true
	}
	for i := range p.tests {
		t := &p.tests[i]
		where := fmt.Sprintf("tests[%d]", i)
		if !t.Name.Set || t.Name.V == "" {
			ps.add(StageSyntax, t.Name.At.Line, t.Name.At.Col, where, "a test needs a name")
			continue
		}
		where = fmt.Sprintf("test %q", t.Name.V)
		if prev, dup := names[t.Name.V]; dup {
			ps.at(StageLint, t.Name.At, where, "duplicate test name (first at line %d)", prev)
		}
		names[t.Name.V] = t.Name.At.Line
		x := &t.Expect
		if !x.wantsDecision() && !x.wantsSurface() && !x.wantsBudget() && !x.wantsMemory() && !x.wantsExclusion() {
			ps.at(StageSyntax, t.Name.At, where, "expect: sets nothing to check (decision, rules, would_deny, would_ask, default, message, message_contains, surface, offered, not_offered, stop, warnings, wrap_up, memory, dropped, memory_rules, would_refuse, excluded)")
		}
		p.checkMemoryTest(ps, t, where)
		if x.wantsDecision() && t.Input.Call.Tool == "" {
			ps.at(StageSyntax, t.Name.At, where, "a test that expects a decision needs input.call.tool")
		}
		switch x.Decision.V {
		case "", "allow", "ask", "deny":
		default:
			ps.at(StageSyntax, x.Decision.At, where, "expect.decision must be allow, ask or deny, got %q", x.Decision.V)
		}
		for _, list := range []*[]string{x.Rules, x.WouldDeny, x.WouldAsk} {
			if list == nil {
				continue
			}
			for _, id := range *list {
				if !ruleIDs[id] {
					ps.at(StageLint, t.Name.At, where, "expects rule %q, which the file does not define", id)
				}
			}
		}
		if x.Stop != nil && *x.Stop != "" && *x.Stop != "none" && !budgetIDs[*x.Stop] {
			ps.at(StageLint, t.Name.At, where, "expects stop by budget %q, which the file does not define", *x.Stop)
		}
		if x.Warnings != nil {
			for _, id := range *x.Warnings {
				if !budgetIDs[id] {
					ps.at(StageLint, t.Name.At, where, "expects a warning from budget %q, which the file does not define", id)
				}
			}
		}
		if x.Surface != nil && *x.Surface != "*" {
			if _, ok := p.setIdx[*x.Surface]; !ok {
				ps.at(StageLint, t.Name.At, where, "expects surface %q, which is not a set in surfaces.sets (\"*\" means every tool)", *x.Surface)
			}
		}
		if x.wantsSurface() && !p.hasSurfaces {
			ps.at(StageLint, t.Name.At, where, "expects a surface, but the file has no surfaces: section (every tool is offered)")
		}
		t.Input.check(ps, t.Name.At, where)
	}
}

// idRegistry checks the ids of rules, select and drop rules and budgets:
// present where they are required, without spaces or commas, and unique
// across the file.
type idRegistry struct {
	ps   *problems
	seen map[string]pos
}

// claim records id, reporting a duplicate.
func (r *idRegistry) claim(id str, where string) {
	if prev, dup := r.seen[id.V]; dup {
		r.ps.at(StageLint, id.At, where, "duplicate id %q (first used at line %d); ids of rules, select and drop rules and budgets must be unique", id.V, prev.Line)
		return
	}
	r.seen[id.V] = id.At
}

// require checks and claims the required id of item i of list (a kind,
// at at) and returns how errors name the item: `kind "id"`, or
// `list[i]` without an id. ok is false without an id: skip the item.
func (r *idRegistry) require(list string, i int, kind string, id str, at pos) (where string, ok bool) {
	where = fmt.Sprintf("%s[%d]", list, i)
	if id.Set {
		where = fmt.Sprintf("%s %q", kind, id.V)
	}
	if !id.Set || strings.TrimSpace(id.V) == "" {
		if at.Line > 0 { // else the item was not a mapping, already reported
			r.ps.at(StageSyntax, at, where, "id is required")
		}
		return where, false
	}
	if strings.ContainsAny(id.V, " \t\n,") {
		r.ps.at(StageSyntax, id.At, where, "id %q must not contain spaces or commas", id.V)
	}
	r.claim(id, where)
	return where, true
}
