package policy

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
)

// The snapshot: what a load produced, in a compact form the test cache
// keeps beside a file's verdict (cache.go), so that a start or reload the
// cache vouches for neither parses the YAML nor compiles nor lints again.
// It holds everything Load builds that is not an expression's compiled
// program: ids, effects, modes, tools, positions, the expressions' source
// text, each rule's tool scope and index guard (what analysis of the
// compiled expression found), the budget constants, the surfaces, and the
// warnings Deprecated reports. The expressions are compiled on first use
// (program.compiled): a decision compiles only the rules the index lets
// through. Everything in it is decided by what the cache key holds (the
// file's bytes, the build, the tools' specs), so it is what a full load
// of the file would build; why a snapshot and not a faster parser:
// RATIONALE.md, "Policy load from the test cache: a snapshot, compiled on
// first use".

// snapshotVersion changes with the snapshot's format or meaning. The key
// holds the build, so one kernel never reads another's snapshots; the
// version guards a format change within one build's tests.
const snapshotVersion = 3 // 2: the memory: section; 3: its exclude rules

// maxSnapshotSize bounds the snapshot read: it is smaller than the file
// it comes from (at most MaxFileSize), its tests left out.
const maxSnapshotSize = 4 * MaxFileSize

type snapshot struct {
	Version        int
	Key            string
	Name, Revision string
	DefEffect      string
	AskDeny        bool
	Tests          int
	Consts         []snapConst
	Vars           []snapVar
	HasSurfaces    bool
	Sets           []snapSet
	DefSet         int
	Selects        []snapSelect
	Drops          []snapDrop
	Rules          []snapRule
	Budgets        []snapBudget
	Memory         []snapMemory
	Deprecated     []snapProblem
}

type snapPos struct{ Line, Col int }

type snapExpr struct {
	Src     string
	At      snapPos
	Style   uint32
	Comment string
	Where   string
}

// snapConst is a budget constant: Kind i(nt), f(loat), b(ool), s(tring)
// or d(uration), the value in text.
type snapConst struct {
	Name  string
	At    snapPos
	Kind  byte
	Value string
}

type snapVar struct {
	Name string
	At   snapPos
	Expr snapExpr
}

type snapSet struct {
	Name         string
	At           snapPos
	Exact, Globs []string
}

type snapSelect struct {
	ID   string
	At   snapPos
	When *snapExpr
	Set  int
}

type snapDrop struct {
	ID    string
	At    snapPos
	Globs []string
	When  *snapExpr
}

type snapRule struct {
	ID      string
	At      snapPos
	Effect  string
	Dryrun  bool
	When    *snapExpr
	Message *snapExpr
	// Tools is set when the rule has a tools: list (Globs); else it
	// applies to any tool.
	Tools bool
	Globs []string
	// AnyName is set when the scope's names are unknown (nil); else
	// Names holds them, sorted.
	AnyName bool
	Names   []string
	Rest    bool
	Guarded bool
	Guard   snapGuard
}

type snapGuard struct {
	Kind    guardKind
	Subject string
	Values  []snapConst // Name unused
}

type snapBudget struct {
	ID              string
	At              snapPos
	Warn, Stop, Msg *snapExpr
	WrapUp          bool
}

type snapMemory struct {
	ID            string
	At            snapPos
	Refuse        bool
	Exclude       bool
	Dryrun        bool
	When, Message *snapExpr
}

type snapProblem struct {
	At         snapPos
	Where, Msg string
}

// encodeSnapshot encodes the snapshot of a policy a full load built.
func (p *Policy) encodeSnapshot(key string, tests int) ([]byte, error) {
	s := snapshot{Version: snapshotVersion, Key: key, Name: p.name, Revision: p.revision,
		DefEffect: string(p.defEffect), AskDeny: p.askDeny, Tests: tests,
		HasSurfaces: p.hasSurfaces, DefSet: p.defSet}
	for _, k := range p.comp.consts {
		kind, v, err := constText(k.Value)
		if err != nil {
			return nil, fmt.Errorf("budget.%s: %w", k.Name, err)
		}
		s.Consts = append(s.Consts, snapConst{Name: k.Name, At: snapPos(k.At), Kind: kind, Value: v})
	}
	slices.SortFunc(s.Consts, func(a, b snapConst) int { return strings.Compare(a.Name, b.Name) })
	for _, v := range p.vars {
		s.Vars = append(s.Vars, snapVar{Name: v.name, At: snapPos(v.at), Expr: *snapExprOf(v.prog)})
	}
	for _, set := range p.sets {
		s.Sets = append(s.Sets, snapSet{Name: set.name, At: snapPos(set.at), Exact: sortedKeys(set.exact), Globs: set.globs})
	}
	for _, sel := range p.selects {
		s.Selects = append(s.Selects, snapSelect{ID: sel.id, At: snapPos(sel.at), When: snapExprOf(sel.when), Set: sel.set})
	}
	for _, d := range p.drops {
		s.Drops = append(s.Drops, snapDrop{ID: d.id, At: snapPos(d.at), Globs: d.globs, When: snapExprOf(d.when)})
	}
	for _, r := range p.rules {
		sr := snapRule{ID: r.id, At: snapPos(r.at), Effect: string(r.effect), Dryrun: r.dryrun,
			When: snapExprOf(r.when), Message: snapExprOf(r.message), Tools: r.globs != nil, Globs: r.globs,
			AnyName: r.scope.names == nil, Names: sortedKeys(r.scope.names), Rest: r.scope.rest, Guarded: r.guarded}
		if r.guarded {
			sr.Guard = snapGuard{Kind: r.guard.kind, Subject: r.guard.subject}
			for _, v := range r.guard.values {
				kind, text, err := keyText(v)
				if err != nil {
					return nil, fmt.Errorf("rule %s: %w", r.id, err)
				}
				sr.Guard.Values = append(sr.Guard.Values, snapConst{Kind: kind, Value: text})
			}
		}
		s.Rules = append(s.Rules, sr)
	}
	for _, b := range p.budgets {
		s.Budgets = append(s.Budgets, snapBudget{ID: b.id, At: snapPos(b.at), Warn: snapExprOf(b.warn),
			Stop: snapExprOf(b.stop), Msg: snapExprOf(b.msg), WrapUp: b.wrapUp})
	}
	for _, r := range p.memRules {
		s.Memory = append(s.Memory, snapMemory{ID: r.id, At: snapPos(r.at), Refuse: r.refuse, Exclude: r.exclude, Dryrun: r.dryrun,
			When: snapExprOf(r.when), Message: snapExprOf(r.message)})
	}
	for _, d := range p.deprecated {
		s.Deprecated = append(s.Deprecated, snapProblem{At: snapPos{d.Line, d.Col}, Where: d.Where, Msg: d.Msg})
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func snapExprOf(pr *program) *snapExpr {
	if pr == nil {
		return nil
	}
	e := pr.src
	return &snapExpr{Src: e.Src, At: snapPos(e.At), Style: uint32(e.Style), Comment: e.Comment, Where: pr.where}
}

// constText renders a budget constant's value with its kind.
func constText(v any) (kind byte, text string, err error) {
	switch v := v.(type) {
	case int:
		return 'i', strconv.Itoa(v), nil
	case float64:
		return 'f', strconv.FormatFloat(v, 'g', -1, 64), nil
	case bool:
		return 'b', strconv.FormatBool(v), nil
	case string:
		return 's', v, nil
	case time.Duration:
		return 'd', strconv.FormatInt(int64(v), 10), nil
	}
	return 0, "", fmt.Errorf("a constant of type %T", v)
}

// keyText renders an index key (see indexKey) with its kind.
func keyText(v any) (kind byte, text string, err error) {
	switch v := v.(type) {
	case nilKey:
		return 'n', "", nil
	case string, bool, float64:
		return constText(v)
	}
	return 0, "", fmt.Errorf("an index key of type %T", v)
}

// parseConst reads what constText wrote.
func parseConst(kind byte, text string) (any, error) {
	switch kind {
	case 'i':
		return strconv.Atoi(text)
	case 'f':
		return strconv.ParseFloat(text, 64)
	case 'b':
		return strconv.ParseBool(text)
	case 's':
		return text, nil
	case 'd':
		n, err := strconv.ParseInt(text, 10, 64)
		return time.Duration(n), err
	case 'n':
		return nilKey{}, nil
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

// policyFromSnapshot builds the policy a full load of src built when it
// wrote b, its snapshot under key. An error says the snapshot is damaged
// or not this file's: the caller then loads the file in full.
func policyFromSnapshot(name string, src []byte, sha string, opts Options, key string, b []byte) (*Policy, error) {
	var s snapshot
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&s); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if s.Version != snapshotVersion || s.Key != key {
		return nil, fmt.Errorf("version %d, key %.12s…: not this file's", s.Version, s.Key)
	}
	p := &Policy{name: s.Name, revision: s.Revision, sha: sha, file: name, lines: splitLines(src), opts: opts,
		specs: newSpecSet(opts.Tools), askDeny: s.AskDeny, hasSurfaces: s.HasSurfaces, defSet: s.DefSet,
		setIdx: make(map[string]int, len(s.Sets)), snapshotSrc: src}
	var ok bool
	if p.defEffect, ok = parseEffect(s.DefEffect); !ok {
		return nil, fmt.Errorf("default effect %q", s.DefEffect)
	}
	c := &compiler{ps: &problems{file: name, lines: p.lines}, consts: make(map[string]constDef, len(s.Consts)),
		varIdx: make(map[string]int, len(s.Vars))}
	p.comp = c
	for _, k := range s.Consts {
		v, err := parseConst(k.Kind, k.Value)
		if err != nil || k.Kind == 'n' {
			return nil, fmt.Errorf("budget.%s: bad value", k.Name)
		}
		c.consts[k.Name] = constDef{Name: k.Name, At: pos(k.At), Value: v}
	}
	lazy := func(e *snapExpr, want resultKind, upto int) *program {
		if e == nil {
			return nil
		}
		src := exprSrc{Src: e.Src, At: pos(e.At), Style: yaml.Style(e.Style), Set: true, Comment: e.Comment}
		return &program{src: src, where: e.Where, lazy: &lazyCompile{c: c, want: want, upto: upto}}
	}
	for i, v := range s.Vars {
		c.vars = append(c.vars, namedExpr{Name: str{V: v.Name, At: pos(v.At), Set: true},
			Expr: exprSrc{Src: v.Expr.Src, At: pos(v.Expr.At), Style: yaml.Style(v.Expr.Style), Set: true, Comment: v.Expr.Comment}})
		c.varIdx[v.Name] = i
		p.vars = append(p.vars, &varDef{name: v.Name, at: pos(v.At), prog: lazy(&v.Expr, wantAny, i)})
	}
	all := len(s.Vars)
	for i, set := range s.Sets {
		ss := &surfaceSet{name: set.Name, at: pos(set.At), exact: make(map[string]bool, len(set.Exact)), globs: set.Globs}
		for _, n := range set.Exact {
			ss.exact[n] = true
		}
		p.setIdx[set.Name] = i
		p.sets = append(p.sets, ss)
	}
	if p.defSet < -1 || p.defSet >= len(p.sets) {
		return nil, fmt.Errorf("default surface %d of %d", p.defSet, len(p.sets))
	}
	for _, sel := range s.Selects {
		if sel.Set < -1 || sel.Set >= len(p.sets) {
			return nil, fmt.Errorf("select %s: surface %d of %d", sel.ID, sel.Set, len(p.sets))
		}
		p.selects = append(p.selects, &selectRule{id: sel.ID, at: pos(sel.At), when: lazy(sel.When, wantBool, all), set: sel.Set})
	}
	for _, d := range s.Drops {
		p.drops = append(p.drops, &dropRule{id: d.ID, at: pos(d.At), globs: d.Globs, when: lazy(d.When, wantBool, all)})
	}
	p.rules = make([]*rule, 0, len(s.Rules))
	for i := range s.Rules {
		sr := &s.Rules[i]
		r := &rule{id: sr.ID, at: pos(sr.At), index: i, dryrun: sr.Dryrun,
			when: lazy(sr.When, wantBool, all), message: lazy(sr.Message, wantString, all), guarded: sr.Guarded}
		if r.effect, ok = parseEffect(sr.Effect); !ok {
			return nil, fmt.Errorf("rule %s: effect %q", sr.ID, sr.Effect)
		}
		if sr.Tools {
			r.globs = sr.Globs
			if r.globs == nil {
				r.globs = []string{}
			}
		}
		r.scope.rest = sr.Rest
		if !sr.AnyName {
			r.scope.names = make(map[string]bool, len(sr.Names))
			for _, n := range sr.Names {
				r.scope.names[n] = true
			}
		}
		if sr.Guarded {
			if r.when == nil || sr.Guard.Kind > guardPaths || len(sr.Guard.Values) == 0 {
				return nil, fmt.Errorf("rule %s: bad guard", sr.ID)
			}
			r.guard = guard{kind: sr.Guard.Kind, subject: sr.Guard.Subject, values: make([]any, len(sr.Guard.Values))}
			for j, v := range sr.Guard.Values {
				k, err := parseConst(v.Kind, v.Value)
				if _, isString := k.(string); err != nil || v.Kind == 'i' || v.Kind == 'd' ||
					(r.guard.kind != guardEq && !isString) {
					return nil, fmt.Errorf("rule %s: bad guard value", sr.ID)
				}
				r.guard.values[j] = k
			}
		}
		p.rules = append(p.rules, r)
	}
	for _, b := range s.Budgets {
		p.budgets = append(p.budgets, &budgetDef{id: b.ID, at: pos(b.At), warn: lazy(b.Warn, wantBool, all),
			stop: lazy(b.Stop, wantBool, all), msg: lazy(b.Msg, wantString, all), wrapUp: b.WrapUp})
	}
	for i, r := range s.Memory {
		p.memRules = append(p.memRules, &memoryRule{id: r.ID, at: pos(r.At), index: i, refuse: r.Refuse, exclude: r.Exclude, dryrun: r.Dryrun,
			when: lazy(r.When, wantBool, all), message: lazy(r.Message, wantString, all)})
	}
	for _, d := range s.Deprecated {
		p.deprecated = append(p.deprecated, p.problem(StageDeprecated, pos(d.At), d.Where, d.Msg))
	}
	p.rindex = newRuleIndex(p.rules)
	p.verdict = TestVerdict{Cached: true, Tests: s.Tests}
	return p, nil
}

func parseEffect(s string) (kernel.Effect, bool) {
	switch e := kernel.Effect(s); e {
	case kernel.EffectAllow, kernel.EffectAsk, kernel.EffectDeny:
		return e, true
	}
	return "", false
}
