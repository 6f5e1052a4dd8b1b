package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// The memory: section governs what memory's injection (docs/memory.md)
// adds to a request. Before each injection the kernel hands the policy
// the retrieval (MemoryRetrieval): drop rules run once per hit, with the
// hit in hit and the whole retrieval in memory, and remove the hits they
// match; refuse rules then run once, with memory describing the hits that
// are left, and the first that matches refuses the injection: nothing is
// added. An error in either counts as a match (fail closed). A rule with
// mode: dryrun is evaluated and reported, never acted on. Why a section of
// its own and not rules: RATIONALE.md, "Policy governs memory".

// The effects of a memory: rule.
const (
	MemoryDrop   = "drop"
	MemoryRefuse = "refuse"
)

// memoryRuleDoc is one rule of the memory: section as written.
type memoryRuleDoc struct {
	At          pos     `yaml:"-"`
	ID          str     `yaml:"id"`
	Description string  `yaml:"description"`
	Effect      str     `yaml:"effect"`
	When        exprSrc `yaml:"when"`
	Message     exprSrc `yaml:"message"`
	Mode        str     `yaml:"mode"`
}

// memoryRule is a compiled memory: rule.
type memoryRule struct {
	id      string
	at      pos
	index   int
	refuse  bool // else drop, unless exclude
	exclude bool // memory_exclude.go
	dryrun  bool
	when    *program // nil: always
	message *program
}

func (r *memoryRule) effect() string {
	switch {
	case r.refuse:
		return MemoryRefuse
	case r.exclude:
		return MemoryExclude
	}
	return MemoryDrop
}

// MemoryEnv is the retrieval memory is about to inject, in memory: rules
// (the zero value everywhere else). In a drop rule it describes every hit
// retrieved; in a refuse rule, the hits the drop rules left.
type MemoryEnv struct {
	// Scope is the scope searched: session, owner or workspace.
	Scope string `expr:"scope"`
	// Count is the number of hits (len(hits)); Retrieved the number the
	// search returned, before any drop rule.
	Count     int `expr:"count"`
	Retrieved int `expr:"retrieved"`
	// Hits are the hits, best first.
	Hits []MemoryHit `expr:"hits"`
	// Sources are the distinct sources of the hits (text, vector,
	// hybrid), sorted.
	Sources []string `expr:"sources"`
	// TopScore is the best hit's score (0 without hits).
	TopScore float64 `expr:"top_score"`
}

// MemoryHit is one chunk memory retrieved: where it comes from and how it
// was found. Its yaml keys are those of a test input's memory.hits.
type MemoryHit struct {
	// Session and Seq say which stored message the chunk is part of, Part
	// which part of it (0 for the first).
	Session string `expr:"session" yaml:"session" json:"session"`
	Seq     int    `expr:"seq" yaml:"seq" json:"seq"`
	Part    int    `expr:"part" yaml:"part" json:"part,omitempty"`
	// Role is user, assistant or tool; Tool the tool whose result it is.
	Role string `expr:"role" yaml:"role" json:"role"`
	Tool string `expr:"tool" yaml:"tool" json:"tool,omitempty"`
	// Source is how it was found: text, vector or hybrid (both).
	Source string  `expr:"source" yaml:"source" json:"source"`
	Score  float64 `expr:"score" yaml:"score" json:"score"`
	// Rank is its place in the retrieval, from 1 (default: its place in
	// a test input's list).
	Rank int `expr:"rank" yaml:"rank" json:"rank"`
	// Age is the time since the message was stored.
	Age time.Duration `expr:"age" yaml:"age" json:"age"`
	// SameSession says the chunk is from the session being run;
	// SameOwner that it is from a session of the same owner (serve.owner
	// label, "" for both outside kernel serve).
	SameSession bool `expr:"same_session" yaml:"same_session" json:"same_session"`
	SameOwner   bool `expr:"same_owner" yaml:"same_owner" json:"same_owner"`
	// Text is the chunk's text as stored (scrubbed).
	Text string `expr:"text" yaml:"text" json:"-"`
}

// MemoryRetrieval is what memory retrieved for the next request: the scope
// searched and the hits, best first.
type MemoryRetrieval struct {
	Scope string      `yaml:"scope"`
	Hits  []MemoryHit `yaml:"hits"`
	// Chunk and Call are read from a test input only: a chunk for the
	// exclude rules to rule on, and the call a tool result answers
	// (memory_exclude.go).
	Chunk *MemoryChunk `yaml:"chunk"`
	Call  *CallInput   `yaml:"call"`
}

// MemoryDecision is the policy's ruling on an injection.
type MemoryDecision struct {
	ID       string `json:"id"`
	Revision string `json:"revision"`
	SHA256   string `json:"sha256"`
	// Refused is set when a refuse rule matched: nothing is injected.
	// Rule is the refusing rule and Message its message.
	Refused bool   `json:"refused"`
	Rule    string `json:"rule,omitempty"`
	Message string `json:"message,omitempty"`
	// Dropped are the hits drop rules removed.
	Dropped []MemoryDropped `json:"dropped,omitempty"`
	// WouldRefuse and WouldDrop are what dry-run rules would have done.
	WouldRefuse []string        `json:"would_refuse,omitempty"`
	WouldDrop   []MemoryDropped `json:"would_drop,omitempty"`
	// Kept are the ranks of the hits to inject (none when Refused).
	Kept     []int         `json:"kept"`
	EvalTime time.Duration `json:"eval_time"`
}

// MemoryDropped is a hit (by rank) a drop rule removed, and the rule.
type MemoryDropped struct {
	Rank    int    `json:"rank"`
	Session string `json:"session"`
	Seq     int    `json:"seq"`
	Rule    string `json:"rule"`
	Err     string `json:"error,omitempty"`
}

// Rules are the ids of the rules that acted (not the dry-run ones): the
// refusing rule and the drop rules, each once, in that order.
func (d *MemoryDecision) Rules() []string {
	var out []string
	if d.Rule != "" {
		out = append(out, d.Rule)
	}
	for _, x := range d.Dropped {
		if !slices.Contains(out, x.Rule) {
			out = append(out, x.Rule)
		}
	}
	return out
}

// HasMemoryRules reports whether the file has a memory: section with a
// rule; without one Memory keeps every hit.
func (p *Policy) HasMemoryRules() bool { return len(p.memRules) > 0 }

// Memory rules on an injection: the drop rules remove hits, then the
// refuse rules may refuse what is left (see the memory: section above).
// The decision is written to the decision log, if any.
func (p *Policy) Memory(_ context.Context, st *kernel.State, r MemoryRetrieval) MemoryDecision {
	start := time.Now()
	env, m := borrow(st)
	d := p.memory(m, env, r, nil)
	giveBack(env, m)
	d.ID = kernel.NewIDAt(start) // the decision's own clock reading
	d.EvalTime = time.Since(start)
	if p.opts.Log != nil {
		p.opts.Log.writeMemory(p, st, d)
	}
	return d
}

// memTrace records what each memory rule did, for tests and explain:
// per rule, whether it matched any hit (drop) or the retrieval (refuse),
// and its first error.
type memTrace struct {
	matched []bool
	errs    []error
	ran     []bool
}

func (p *Policy) newMemTrace() *memTrace {
	n := len(p.memRules)
	return &memTrace{matched: make([]bool, n), errs: make([]error, n), ran: make([]bool, n)}
}

func (tr *memTrace) note(r *memoryRule, ok bool, err error) {
	if tr == nil {
		return
	}
	tr.ran[r.index] = true
	tr.matched[r.index] = tr.matched[r.index] || ok || err != nil
	if err != nil && tr.errs[r.index] == nil {
		tr.errs[r.index] = err
	}
}

func (p *Policy) memory(m *vm.VM, env *Env, r MemoryRetrieval, tr *memTrace) MemoryDecision {
	d := MemoryDecision{Revision: p.revision, SHA256: p.sha}
	hits := slices.Clone(r.Hits)
	for i := range hits {
		if hits[i].Rank == 0 {
			hits[i].Rank = i + 1
		}
	}
	env.Memory = describeMemory(r.Scope, hits, len(hits))
	kept := hits[:0:0]
	for _, h := range hits {
		env.Hit = h
		dropped := false
		p.applyMemoryRules(m, env, tr, isDrop, &dropped, func(mr *memoryRule, err error) {
			x := MemoryDropped{Rank: h.Rank, Session: h.Session, Seq: h.Seq, Rule: mr.id}
			if err != nil {
				x.Err = err.Error()
			}
			switch {
			case mr.dryrun:
				d.WouldDrop = append(d.WouldDrop, x)
			case !dropped:
				d.Dropped, dropped = append(d.Dropped, x), true
			}
		})
		if !dropped {
			kept = append(kept, h)
		}
	}
	env.Hit = MemoryHit{}
	env.Memory = describeMemory(r.Scope, kept, len(hits))
	p.applyMemoryRules(m, env, tr, isRefuse, &d.Refused, func(mr *memoryRule, err error) {
		switch {
		case mr.dryrun:
			d.WouldRefuse = append(d.WouldRefuse, mr.id)
		case !d.Refused:
			d.Refused, d.Rule = true, mr.id
			d.Message = p.memoryMessage(m, mr, err, env)
		}
	})
	d.Kept = []int{}
	if !d.Refused {
		for _, h := range kept {
			d.Kept = append(d.Kept, h.Rank)
		}
	}
	return d
}

func (p *Policy) memoryMessage(m *vm.VM, r *memoryRule, whenErr error, env *Env) string {
	if whenErr != nil {
		return fmt.Sprintf("memory rule %s could not be evaluated, so it applies (fail closed): %v", r.id, whenErr)
	}
	if r.message == nil {
		return "memory rule " + r.id
	}
	s, err := evalString(m, r.message, env)
	if err != nil {
		return fmt.Sprintf("memory rule %s (its message failed: %v)", r.id, err)
	}
	return s
}

// describeMemory is the memory section for hits (retrieved before drops).
func describeMemory(scope string, hits []MemoryHit, retrieved int) MemoryEnv {
	e := MemoryEnv{Scope: scope, Count: len(hits), Retrieved: retrieved, Hits: hits, Sources: []string{}}
	for _, h := range hits {
		if !slices.Contains(e.Sources, h.Source) {
			e.Sources = append(e.Sources, h.Source)
		}
		e.TopScore = max(e.TopScore, h.Score)
	}
	slices.Sort(e.Sources)
	return e
}

// buildMemory compiles the memory: section.
func (p *Policy) buildMemory(ps *problems, c *compiler, docs []memoryRuleDoc, ids *idRegistry) {
	var jobs []compileJob
	for i, rd := range docs {
		where, ok := ids.require("memory", i, "memory rule", rd.ID, rd.At)
		if !ok {
			continue
		}
		r := &memoryRule{id: rd.ID.V, at: rd.ID.At, index: len(p.memRules)}
		switch rd.Effect.V {
		case MemoryRefuse:
			r.refuse = true
		case MemoryExclude:
			r.exclude = true
		case MemoryDrop:
		case "":
			ps.at(StageSyntax, rd.ID.At, where, "effect is required: refuse (inject nothing), drop (leave out the hit) or exclude (do not index the chunk)")
		default:
			ps.at(StageSyntax, rd.Effect.At, where, "effect must be refuse, drop or exclude, got %q", rd.Effect.V)
		}
		switch rd.Mode.V {
		case "", "enforce":
		case "dryrun":
			r.dryrun = true
		default:
			ps.at(StageSyntax, rd.Mode.At, where, "mode must be enforce or dryrun, got %q", rd.Mode.V)
		}
		if rd.When.Set {
			jobs = append(jobs, compileJob{&r.when, rd.When, where + ": when", wantBool})
		}
		if rd.Message.Set {
			jobs = append(jobs, compileJob{&r.message, rd.Message, where + ": message", wantString})
		}
		p.memRules = append(p.memRules, r)
	}
	c.compileAll(jobs, len(c.vars))
}

// lintMemory reports memory, hit and chunk where they are always the zero
// value: hit outside drop rules, memory outside drop and refuse rules,
// chunk outside exclude rules.
func (p *Policy) lintMemory(ps *problems) {
	check := func(pr *program, at pos, where string, allowed map[string]bool) {
		if pr == nil || pr.lazy != nil {
			return
		}
		for _, root := range []string{"memory", "hit", "chunk"} {
			if allowed[root] || !usesRoot(pr.node(), root) {
				continue
			}
			ps.at(StageLint, at, where, "%s is only set in %s, so here it is always empty", root,
				map[string]string{"memory": "memory: rules with effect drop or refuse", "hit": "memory: rules with effect drop",
					"chunk": "memory: rules with effect exclude"}[root])
		}
	}
	none := map[string]bool{}
	for _, r := range p.rules {
		check(r.when, r.at, "rule "+quote(r.id), none)
		check(r.message, r.at, "rule "+quote(r.id), none)
	}
	for _, s := range p.selects {
		check(s.when, s.at, "select "+quote(s.id), none)
	}
	for _, d := range p.drops {
		check(d.when, d.at, "drop "+quote(d.id), none)
	}
	for _, b := range p.budgets {
		for _, pr := range []*program{b.warn, b.stop, b.msg} {
			check(pr, b.at, "budget "+quote(b.id), none)
		}
	}
	for _, r := range p.memRules {
		allowed := map[string]bool{"memory": !r.exclude, "hit": !r.refuse && !r.exclude, "chunk": r.exclude}
		check(r.when, r.at, "memory rule "+quote(r.id), allowed)
		check(r.message, r.at, "memory rule "+quote(r.id), allowed)
	}
}

// usesRoot reports whether the expression refers to the env field root
// (memory, hit), not counting a var that does.
func usesRoot(n ast.Node, root string) bool {
	if n == nil {
		return false
	}
	found := false
	ast.Walk(&n, visitorFunc(func(x *ast.Node) {
		if id, ok := (*x).(*ast.IdentifierNode); ok && id.Value == root {
			found = true
		}
	}))
	return found
}

// MarshalJSON writes eval_time as a Go duration string, as the decision
// log writes a call's.
func (d MemoryDecision) MarshalJSON() ([]byte, error) {
	type plain MemoryDecision
	return json.Marshal(struct {
		plain
		EvalTime string `json:"eval_time"`
	}{plain(d), d.EvalTime.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *MemoryDecision) UnmarshalJSON(b []byte) error {
	type plain MemoryDecision
	var v struct {
		plain
		EvalTime string `json:"eval_time"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = MemoryDecision(v.plain)
	if v.EvalTime != "" {
		t, err := time.ParseDuration(v.EvalTime)
		if err != nil {
			return fmt.Errorf("eval_time: %w", err)
		}
		d.EvalTime = t
	}
	return nil
}

// applyMemoryRules calls applied, in order, for each memory rule of one
// effect (of) that applies to env: its condition is true, or could not
// be evaluated (fail closed: err is why). Once a rule in force has
// applied (*done), the rest are still evaluated for a trace and for
// dry-run rules, and skipped otherwise. Drop, refuse and exclude share
// it.
func (p *Policy) applyMemoryRules(m *vm.VM, env *Env, tr *memTrace, of func(*memoryRule) bool, done *bool, applied func(mr *memoryRule, err error)) {
	for _, mr := range p.memRules {
		if !of(mr) || (*done && tr == nil && !mr.dryrun) {
			continue
		}
		ok, err := eval(m, mr.when, env)
		tr.note(mr, ok, err)
		if ok || err != nil {
			applied(mr, err)
		}
	}
}

func isDrop(r *memoryRule) bool    { return !r.refuse && !r.exclude }
func isRefuse(r *memoryRule) bool  { return r.refuse }
func isExclude(r *memoryRule) bool { return r.exclude }
