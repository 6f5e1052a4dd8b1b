package policy

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// Status is how an expression came out in an explanation.
type Status string

// The statuses of an explained rule.
const (
	Matched       Status = "matched"
	NotMatched    Status = "not matched"
	Errored       Status = "error"
	NotApplicable Status = "not applicable"
	NotEvaluated  Status = "not evaluated"
)

// Explanation says how a policy treats one Input, expression by
// expression, with the values each expression saw.
type Explanation struct {
	Policy, Revision, SHA256 string
	Vars                     []Value
	// Call is set when the input has a call.tool.
	Call *CallExplanation
	// Surface is set when the file has a surfaces: section.
	Surface *SurfaceExplanation
	Budgets []BudgetExplanation
	// Memory is set when the input has a memory: retrieval.
	Memory *MemoryExplanation
}

// MemoryExplanation explains the ruling on the input's retrieval: each
// memory rule (a drop rule's Note lists the ranks it dropped).
type MemoryExplanation struct {
	Hits     int
	Decision MemoryDecision
	// Exclusion is the ruling on input.memory.chunk, when the input has
	// one (exclude rules).
	Exclusion *MemoryExclusion
	Rules     []RuleExplanation
}

// Value is an expression and what it evaluated to.
type Value struct {
	Expr  string
	Value string
	Err   string
}

// CallExplanation explains the decision on the input's call.
type CallExplanation struct {
	Tool     string
	Args     string
	Derived  []Value // call.paths, call.argv, call.command
	Decision kernel.Decision
	Rules    []RuleExplanation
}

// RuleExplanation is one rule (or select rule, drop rule) and its outcome.
type RuleExplanation struct {
	ID     string
	Effect string
	Mode   string
	Status Status
	Err    string
	// Note says why a rule was not applicable (its tools).
	Note string
	Saw  []Value
}

// SurfaceExplanation explains the surface for the input.
type SurfaceExplanation struct {
	Selected string
	Select   []RuleExplanation
	Offered  []string
	// NotInSet are candidates outside the selected set; Dropped maps a
	// dropped tool to the drop rule that removed it.
	NotInSet []string
	Dropped  map[string]string
}

// BudgetExplanation is one budget's outcome.
type BudgetExplanation struct {
	ID      string
	Warn    Status
	Stop    Status
	Err     string
	Message string
	Saw     []Value
}

// Explain evaluates the policy on in and explains every rule, select and
// drop rule and budget. The surface candidates are in.Tools, else the
// registered tools, else the built-in tools.
func (p *Policy) Explain(in Input) (*Explanation, error) {
	x := &Explanation{Policy: p.name, Revision: p.revision, SHA256: p.sha}
	st := in.state()
	m := new(vm.VM)
	env := new(Env)
	env.fillState(st)
	var e *toolEntry
	if in.Call.Tool != "" {
		call, err := in.call(p.specs, st)
		if err != nil {
			return nil, err
		}
		e = p.entry(call.Tool().Name)
		env.fillCall(call, e.extractor(call.Tool().Schema))
	}
	for _, v := range p.vars {
		x.Vars = append(x.Vars, p.probe(m, env, "v."+v.name))
	}
	if e != nil {
		x.Call = p.explainCall(m, env, e)
	}
	if p.hasSurfaces {
		senv := new(Env)
		senv.fillState(st)
		x.Surface = p.explainSurface(m, senv, &in)
	}
	benv := new(Env)
	benv.fillState(st)
	tr := p.newTrace()
	v := p.budget(m, benv, in.phase(), tr)
	for i, b := range p.budgets {
		be := BudgetExplanation{ID: b.id, Warn: status(tr.budgets[i].warn, b.warn != nil), Stop: status(tr.budgets[i].stop, b.stop != nil)}
		for _, r := range []evalResult{tr.budgets[i].warn, tr.budgets[i].stop} {
			if r.err != nil {
				be.Err = r.err.Error()
			}
		}
		for _, n := range v.Warnings {
			if n.ID == b.id {
				be.Message = n.Message
			}
		}
		if v.Stop != nil && v.Stop.ID == b.id {
			be.Message = v.Stop.Message
		}
		be.Saw = p.saw(m, benv, b.warn, b.stop)
		x.Budgets = append(x.Budgets, be)
	}
	if in.Memory != nil {
		x.Memory = p.explainMemory(m, st, &in)
	}
	return x, nil
}

// explainMemory rules on the input's retrieval and explains every memory
// rule, with the values a refuse rule saw (a drop rule's differ per hit).
func (p *Policy) explainMemory(m *vm.VM, st *kernel.State, in *Input) *MemoryExplanation {
	env := new(Env)
	env.fillState(st)
	r := in.retrieval()
	tr := p.newMemTrace()
	d := p.memory(m, env, r, tr)
	x := &MemoryExplanation{Hits: len(r.Hits), Decision: d}
	var xenv *Env // the exclude rules' env, with the chunk
	if in.Memory.Chunk != nil {
		ch, call, err := in.Memory.chunkInput(p.specs, st)
		if err != nil {
			ex := MemoryExclusion{Err: err.Error()}
			x.Exclusion = &ex
		} else {
			xenv = new(Env)
			xenv.fillState(st)
			if call != nil {
				xenv.fillCall(call, p.entry(call.Tool().Name).extractor(call.Tool().Schema))
			}
			ex := p.exclude(m, xenv, ch, tr)
			x.Exclusion = &ex
			xenv.Chunk = ch // exclude clears it; the values below read it
		}
	}
	for i, mr := range p.memRules {
		re := RuleExplanation{ID: mr.id, Effect: mr.effect(), Mode: "enforce",
			Status: status(evalResult{ran: tr.ran[i], matched: tr.matched[i], err: tr.errs[i]}, true)}
		if mr.dryrun {
			re.Mode = "dryrun"
		}
		if tr.errs[i] != nil {
			re.Err = tr.errs[i].Error()
		}
		if mr.refuse {
			re.Saw = p.saw(m, env, mr.when)
		} else if mr.exclude {
			if xenv != nil {
				re.Saw = p.saw(m, xenv, mr.when)
			}
		} else if ranks := memoryRanks(append(slices.Clone(d.Dropped), d.WouldDrop...), mr.id); ranks != "" {
			re.Note = "hits " + ranks
		}
		x.Rules = append(x.Rules, re)
	}
	return x
}

func status(r evalResult, present bool) Status {
	switch {
	case !present:
		return ""
	case !r.ran:
		return NotEvaluated
	case r.err != nil:
		return Errored
	case r.matched:
		return Matched
	}
	return NotMatched
}

func (p *Policy) explainCall(m *vm.VM, env *Env, e *toolEntry) *CallExplanation {
	args, _ := json.Marshal(env.Call.Args)
	ce := &CallExplanation{Tool: env.Call.Tool, Args: string(args)}
	for _, f := range []string{"call.paths", "call.argv", "call.command"} {
		ce.Derived = append(ce.Derived, p.probe(m, env, f))
	}
	tr := p.newTrace()
	d := p.decide(m, env, &e.ruleGroups, tr)
	d.ID, d.EvalTime, d.Revision, d.SHA256 = "", 0, "", ""
	ce.Decision = d
	for i, r := range p.rules {
		mode := "enforce"
		if r.dryrun {
			mode = "dryrun"
		}
		re := RuleExplanation{ID: r.id, Effect: string(r.effect), Mode: mode}
		if !r.appliesTo(env.Call.Tool) {
			re.Status = NotApplicable
			re.Note = "applies to " + describeScope(r)
		} else {
			re.Status = status(tr.rules[i], true)
			if tr.rules[i].err != nil {
				re.Err = tr.rules[i].err.Error()
			}
			re.Saw = p.saw(m, env, r.when)
		}
		ce.Rules = append(ce.Rules, re)
	}
	return ce
}

func describeScope(r *rule) string {
	if names, ok := ruleNames(r); ok {
		return strings.Join(names, ", ")
	}
	if r.globs != nil {
		return strings.Join(r.globs, ", ")
	}
	return "every tool"
}

func (p *Policy) explainSurface(m *vm.VM, env *Env, in *Input) *SurfaceExplanation {
	names := in.Tools
	if len(names) == 0 {
		for _, t := range p.opts.Tools {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		for _, t := range BuiltinSpecs() {
			names = append(names, t.Name)
		}
	}
	specs := make([]kernel.ToolSpec, len(names))
	for i, n := range names {
		specs[i] = p.specs.get(n)
	}
	tr := p.newTrace()
	offered := p.surface(m, env, specs, tr)
	se := &SurfaceExplanation{Selected: "*", Dropped: tr.dropped}
	set := p.defSet
	if tr.chosen >= 0 {
		set = p.selects[tr.chosen].set
	}
	if set >= 0 {
		se.Selected = p.sets[set].name
	}
	if tr.chosen < 0 {
		se.Selected += " (default)"
	}
	for i, s := range p.selects {
		re := RuleExplanation{ID: s.id, Status: status(tr.selects[i], true)}
		if tr.selects[i].err != nil {
			re.Err = tr.selects[i].err.Error()
		}
		if tr.selects[i].ran {
			re.Saw = p.saw(m, env, s.when)
		}
		se.Select = append(se.Select, re)
	}
	have := map[string]bool{}
	for _, o := range offered {
		se.Offered = append(se.Offered, o.Name)
		have[o.Name] = true
	}
	for _, n := range names {
		if _, dropped := tr.dropped[n]; !have[n] && !dropped {
			se.NotInSet = append(se.NotInSet, n)
		}
	}
	return se
}

// saw evaluates the environment references of the given expressions.
func (p *Policy) saw(m *vm.VM, env *Env, progs ...*program) []Value {
	var out []Value
	seen := map[string]bool{}
	for _, pr := range progs {
		if pr == nil {
			continue
		}
		for _, ref := range refs(pr.src.Src) {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			out = append(out, p.probe(m, env, ref))
		}
	}
	return out
}

// probe compiles and evaluates one reference such as call.command or
// v.evidence.
func (p *Policy) probe(m *vm.VM, env *Env, ref string) Value {
	v := Value{Expr: ref}
	prog, errs := p.comp.compileSrc(ref, wantAny, len(p.comp.vars))
	if len(errs) > 0 {
		v.Err = errs[0].msg
		return v
	}
	out, err := m.Run(prog, env)
	if err != nil {
		v.Err = runtimeErr(err).Error()
		return v
	}
	v.Value = formatValue(out)
	return v
}

// maxRefs bounds the values shown per expression.
const maxRefs = 8

var envRoots = map[string]bool{"session": true, "run": true, "turn": true, "tool": true, "call": true, "now": true, "v": true, "budget": true, "agent": true, "memory": true, "hit": true}

// refs lists the environment references an expression makes (the longest
// chains, e.g. call.args.path rather than call), in order of appearance.
func refs(src string) []string {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	callees := map[ast.Node]bool{}
	ast.Walk(&tree.Node, visitorFunc(func(n *ast.Node) {
		if c, ok := (*n).(*ast.CallNode); ok {
			callees[c.Callee] = true
		}
	}))
	type cand struct {
		s    string
		from int
	}
	var cands []cand
	ast.Walk(&tree.Node, visitorFunc(func(n *ast.Node) {
		if callees[*n] {
			return
		}
		switch x := (*n).(type) {
		case *ast.MemberNode, *ast.IdentifierNode:
			if root := chainRoot(x); root != "" && envRoots[root] {
				cands = append(cands, cand{x.String(), x.Location().From})
			}
		}
	}))
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].from < cands[j].from })
	var out []string
	for _, c := range cands {
		longer := false
		for _, o := range cands {
			if o.s != c.s && (strings.HasPrefix(o.s, c.s+".") || strings.HasPrefix(o.s, c.s+"[")) {
				longer = true
				break
			}
		}
		if !longer && !containsString(out, c.s) {
			out = append(out, c.s)
		}
		if len(out) == maxRefs {
			break
		}
	}
	return out
}

func chainRoot(n ast.Node) string {
	for {
		switch x := n.(type) {
		case *ast.MemberNode:
			n = x.Node
		case *ast.IdentifierNode:
			return x.Value
		default:
			return ""
		}
	}
}

type visitorFunc func(*ast.Node)

func (f visitorFunc) Visit(n *ast.Node) { f(n) }

func formatValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		return strconv.Quote(v)
	case time.Duration:
		return v.String()
	case time.Time:
		return v.Format(time.RFC3339)
	}
	if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map) && rv.Len() == 0 {
		if rv.Kind() == reflect.Map {
			return "{}"
		}
		return "[]"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Format writes the explanation as text.
func (x *Explanation) Format(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %s (revision %s, sha256 %s)\n", x.Policy, x.Revision, short(x.SHA256))
	values := func(vs []Value, indent string) {
		for _, v := range vs {
			if v.Err != "" {
				fmt.Fprintf(&b, "%s%s: error: %s\n", indent, v.Expr, v.Err)
			} else {
				fmt.Fprintf(&b, "%s%s = %s\n", indent, v.Expr, v.Value)
			}
		}
	}
	rule := func(r RuleExplanation) {
		mode := ""
		if r.Mode == "dryrun" {
			mode = " (dryrun)"
		}
		fmt.Fprintf(&b, "  %s: %s%s: %s", r.ID, r.Effect, mode, r.Status)
		if r.Note != "" {
			fmt.Fprintf(&b, " (%s)", r.Note)
		}
		if r.Err != "" {
			fmt.Fprintf(&b, ": %s", r.Err)
		}
		b.WriteString("\n")
		values(r.Saw, "      ")
	}
	if len(x.Vars) > 0 {
		b.WriteString("\nvars:\n")
		values(x.Vars, "  ")
	}
	if c := x.Call; c != nil {
		fmt.Fprintf(&b, "\ncall: %s %s\n", c.Tool, c.Args)
		values(c.Derived, "  ")
		d := c.Decision
		fmt.Fprintf(&b, "decision: %s", d.Effect)
		switch {
		case d.Default:
			b.WriteString(" (default)")
		case len(d.Rules) > 0:
			fmt.Fprintf(&b, " by %s", strings.Join(d.Rules, ", "))
		}
		fmt.Fprintf(&b, "\n  message: %s\n", d.Message)
		if len(d.WouldDeny) > 0 {
			fmt.Fprintf(&b, "  would deny (dryrun): %s\n", strings.Join(d.WouldDeny, ", "))
		}
		if len(d.WouldAsk) > 0 {
			fmt.Fprintf(&b, "  would ask (dryrun): %s\n", strings.Join(d.WouldAsk, ", "))
		}
		if len(c.Rules) > 0 {
			b.WriteString("\nrules:\n")
		}
		for _, r := range c.Rules {
			rule(r)
		}
	}
	if s := x.Surface; s != nil {
		fmt.Fprintf(&b, "\nsurface: %s\n", s.Selected)
		for _, r := range s.Select {
			fmt.Fprintf(&b, "  select %s: %s", r.ID, r.Status)
			if r.Err != "" {
				fmt.Fprintf(&b, ": %s", r.Err)
			}
			b.WriteString("\n")
			values(r.Saw, "      ")
		}
		fmt.Fprintf(&b, "  offered: %s\n", orNone(s.Offered))
		if len(s.NotInSet) > 0 {
			fmt.Fprintf(&b, "  not in the set: %s\n", strings.Join(s.NotInSet, ", "))
		}
		for _, t := range sortedKeys(s.Dropped) {
			fmt.Fprintf(&b, "  dropped: %s (by %s)\n", t, s.Dropped[t])
		}
	}
	if len(x.Budgets) > 0 {
		b.WriteString("\nbudgets:\n")
	}
	for _, bu := range x.Budgets {
		fmt.Fprintf(&b, "  %s:", bu.ID)
		if bu.Warn != "" {
			fmt.Fprintf(&b, " warn_when %s", bu.Warn)
		}
		if bu.Stop != "" {
			if bu.Warn != "" {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " stop_when %s", bu.Stop)
		}
		if bu.Err != "" {
			fmt.Fprintf(&b, ": %s", bu.Err)
		}
		b.WriteString("\n")
		if bu.Message != "" {
			fmt.Fprintf(&b, "      message: %s\n", bu.Message)
		}
		values(bu.Saw, "      ")
	}
	if mx := x.Memory; mx != nil {
		d := mx.Decision
		if ex := mx.Exclusion; ex != nil {
			switch {
			case ex.Excluded:
				fmt.Fprintf(&b, "\nmemory chunk: excluded by %s\n", ex.Rule)
			case ex.Err != "":
				fmt.Fprintf(&b, "\nmemory chunk: %s\n", ex.Err)
			default:
				b.WriteString("\nmemory chunk: indexed\n")
			}
			if len(ex.WouldExclude) > 0 {
				fmt.Fprintf(&b, "  would exclude (dryrun): %s\n", strings.Join(ex.WouldExclude, ", "))
			}
		}
		fmt.Fprintf(&b, "\nmemory: %d hits, ", mx.Hits)
		if d.Refused {
			fmt.Fprintf(&b, "refused by %s\n  message: %s\n", d.Rule, d.Message)
		} else {
			fmt.Fprintf(&b, "inject %d\n", len(d.Kept))
		}
		for _, dr := range d.Dropped {
			fmt.Fprintf(&b, "  dropped: hit %d (session %s message %d) by %s\n", dr.Rank, dr.Session, dr.Seq, dr.Rule)
		}
		if len(d.WouldRefuse) > 0 {
			fmt.Fprintf(&b, "  would refuse (dryrun): %s\n", strings.Join(d.WouldRefuse, ", "))
		}
		for _, dr := range d.WouldDrop {
			fmt.Fprintf(&b, "  would drop (dryrun): hit %d by %s\n", dr.Rank, dr.Rule)
		}
		for _, r := range mx.Rules {
			rule(r)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
