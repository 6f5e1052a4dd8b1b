package policy

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// Options configures loading. The zero value loads a policy with no
// registered-tool check and no decision log.
type Options struct {
	// Tools are the registered tools. Lint reports rules, surfaces and drop
	// rules that name a tool not among them, and tests use their specs
	// (tier, tags, schema). Nil skips the name check; tests then use
	// BuiltinSpecs for the built-in tool names.
	Tools []kernel.ToolSpec
	// ToolsFrom, when set, says Tools are a stand-in for a deployment's
	// tools and names them for messages: the CLI's "the embedded
	// defaults" when no configuration is given. The tools the file uses
	// that they do not register are then reported in one problem, each
	// name once, that says to check against the configuration that
	// registers them, instead of once per use.
	ToolsFrom string
	// Log, when non-nil, receives every decision Decide makes (not those
	// of tests, explain or replay).
	Log *DecisionLog
	// Cache, when set, remembers the files that passed their tests, so
	// that loading one again skips them (see VerdictCache). Nil runs the
	// tests on every load.
	Cache *VerdictCache
	// Progress, when set, is called about every 100ms while the file's
	// tests run, from the goroutine that runs them, and once more when
	// they end. The CLI shows it on a terminal.
	Progress func(TestProgress)
}

// Policy is a loaded, compiled, linted and tested policy file. It
// implements kernel.Policy and is safe for concurrent use; it never changes
// after Load (reloading makes a new Policy, see Watcher).
type Policy struct {
	name, revision, sha, file string
	lines                     []string
	opts                      Options
	specs                     *specSet
	comp                      *compiler

	defEffect kernel.Effect
	askDeny   bool

	vars        []*varDef
	rules       []*rule
	hasSurfaces bool
	sets        []*surfaceSet
	setIdx      map[string]int
	defSet      int // index into sets, or -1 for every tool
	selects     []*selectRule
	drops       []*dropRule
	budgets     []*budgetDef
	memRules    []*memoryRule // the memory: section (memory.go)
	// testsDoc is the tests: section as written; tests the decoded tests,
	// and testProblems what decoding and checking them found (loadTests).
	testsDoc     testsDoc
	testsOnce    sync.Once
	tests        []testDoc
	testProblems []Problem
	// snapshotSrc is the file's bytes when the policy was built from the
	// test cache's snapshot (which has no tests: loadTests parses them
	// from here when they are needed).
	snapshotSrc []byte
	// deprecated are the uses of deprecated names (see Deprecated).
	deprecated []Problem

	verdict TestVerdict // how Load passed the tests

	entries  sync.Map // tool name → *toolEntry
	nEntries atomic.Int64
	rindex   *ruleIndex // set by the load; see rulesFor

	// readsOnce computes varSecs and budgetSecs, the State sections the
	// vars and the budgets read (budgetReads).
	readsOnce           sync.Once
	varSecs, budgetSecs sections
	// budgetRun are the run fields the budgets (and vars) read, when they
	// name run only as run.<field> (runFieldsOf); rfAll otherwise.
	budgetRun runFields
}

type varDef struct {
	name string
	at   pos
	prog *program
}

type rule struct {
	id      string
	at      pos
	index   int
	effect  kernel.Effect
	dryrun  bool
	when    *program // nil: always
	message *program
	globs   []string // the rule's tools: list; nil means any tool
	scope   toolScope
	// guard is the when's guard, when guarded (see findGuard): what the
	// rule index files the rule under.
	guard   guard
	guarded bool
	// reads caches readSections: the sections bits, with readsKnown set
	// once computed (racing first computations store the same value).
	reads atomic.Uint32
}

// readsKnown marks rule.reads as computed.
const readsKnown = 1 << 16

// readSections returns the State sections the rule's when and message
// read (sectionsOf), computed once per rule: every tool entry the rule
// applies to ORs them, and scanning the sources again for each of many
// tool names was most of a test run's CPU (RATIONALE.md, "make test's
// CPU outside cmd/kernel (issue 45)").
func (r *rule) readSections() sections {
	if v := r.reads.Load(); v&readsKnown != 0 {
		return sections(v)
	}
	s := sectionsOf(progSrc(r.when), progSrc(r.message))
	r.reads.Store(uint32(s) | readsKnown)
	return s
}

// appliesTo reports whether the rule can match a call of the named tool.
func (r *rule) appliesTo(name string) bool {
	return (r.scope.names == nil || r.scope.names[name]) && (r.globs == nil || matchAny(r.globs, name))
}

// unconditional reports whether the rule matches every call of the tools
// it applies to.
func (r *rule) unconditional() bool { return r.when == nil || !r.scope.rest }

type surfaceSet struct {
	name  string
	at    pos
	exact map[string]bool
	globs []string
}

func (s *surfaceSet) has(name string) bool { return s.exact[name] || matchAny(s.globs, name) }

type selectRule struct {
	id   string
	at   pos
	when *program // nil: always
	set  int
}

type dropRule struct {
	id    string
	at    pos
	globs []string
	when  *program // nil: always
}

type budgetDef struct {
	id              string
	at              pos
	warn, stop, msg *program
	wrapUp          bool
}

// Name is the policy's name: field.
func (p *Policy) Name() string { return p.name }

// Revision is the policy's revision: field.
func (p *Policy) Revision() string { return p.revision }

// SHA256 is the hex SHA-256 of the file's bytes.
func (p *Policy) SHA256() string { return p.sha }

// File is the name the policy was loaded under (its path for LoadFile).
func (p *Policy) File() string { return p.file }

// maxEntries bounds the per-tool cache; tools beyond it are evaluated
// without caching (still correctly).
const maxEntries = 4096

// toolEntry is what the policy precomputes for one tool name: the rules
// that can apply to it and their index, its surface sets and drop rules,
// and how to find its paths and command.
type toolEntry struct {
	ex atomic.Pointer[extractor]
	// rules are every rule that applies to the tool, in file order (what
	// explain shows, and what the index's candidates are a subset of);
	// ruleGroups the same rules grouped.
	rules []*rule
	ruleGroups
	// idx finds the candidates for a call; nil when no rule that applies
	// to the tool has a guard (every rule then runs).
	idx   *entryIndex
	inSet []bool
	drops []*dropRule
	// reads are the State sections the rules' expressions read.
	reads sections
}

func (p *Policy) entry(name string) *toolEntry {
	if e, ok := p.entries.Load(name); ok {
		return e.(*toolEntry)
	}
	e := &toolEntry{rules: p.rulesFor(name)}
	e.reads = p.rulesReads(e.rules)
	groupRules(&e.ruleGroups, e.rules)
	if p.rindex != nil {
		e.idx = p.rindex.newEntryIndex(name)
	}
	e.inSet = make([]bool, len(p.sets))
	for i, s := range p.sets {
		e.inSet[i] = s.has(name)
	}
	for _, d := range p.drops {
		if matchAny(d.globs, name) {
			e.drops = append(e.drops, d)
		}
	}
	if p.nEntries.Load() < maxEntries {
		if actual, loaded := p.entries.LoadOrStore(name, e); loaded {
			return actual.(*toolEntry)
		}
		p.nEntries.Add(1)
	}
	return e
}

func (e *toolEntry) extractor(schema []byte) *extractor {
	if x := e.ex.Load(); x != nil && sameBytes(x.schema, schema) {
		return x
	}
	x := newExtractor(schema)
	e.ex.Store(x)
	return x
}

func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return string(a) == string(b)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if g == name {
			return true
		}
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

var vmPool = sync.Pool{New: func() any { return new(vm.VM) }}

// runVM runs prog on env with m, or, when m is nil, with a VM taken from
// the pool for this one run: Budget passes nil, so a check its fast
// closures answer never touches the pool.
func runVM(m *vm.VM, prog *vm.Program, env *Env) (any, error) {
	if m != nil {
		return m.Run(prog, env)
	}
	m = vmPool.Get().(*vm.VM)
	out, err := m.Run(prog, env)
	vmPool.Put(m)
	return out, err
}

// eval runs a boolean program (m may be nil: see runVM). A nil program is
// true.
func eval(m *vm.VM, p *program, env *Env) (bool, error) {
	if p == nil {
		return true, nil
	}
	if f := p.fastPath(); f != nil {
		if v, ok := f(env); ok {
			return v.b, nil
		}
	}
	prog, err := p.compiled()
	if err != nil {
		return false, err
	}
	out, err := runVM(m, prog, env)
	if err != nil {
		return false, runtimeErr(err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %s, not true or false", describe(out))
	}
	return b, nil
}

// evalString runs a string program (m may be nil: see runVM).
func evalString(m *vm.VM, p *program, env *Env) (string, error) {
	prog, err := p.compiled()
	if err != nil {
		return "", err
	}
	out, err := runVM(m, prog, env)
	if err != nil {
		return "", runtimeErr(err)
	}
	s, ok := out.(string)
	if !ok {
		return "", fmt.Errorf("the message gave %s, not a string", describe(out))
	}
	return s, nil
}

func describe(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T %v", v, v)
}

// runtimeErr keeps expr's message and drops its source snippet.
func runtimeErr(err error) error {
	var fe *file.Error
	if errors.As(err, &fe) {
		return errors.New(fe.Message)
	}
	return err
}

// evalResult is the outcome of one expression in a trace.
type evalResult struct {
	ran     bool
	matched bool
	err     error
}

// trace records every expression a decision, surface or budget check
// evaluated, for tests (coverage), explain and replay. Decisions traced
// evaluate every applicable rule, not only until the winning group.
type trace struct {
	rules   []evalResult // by rule index
	selects []evalResult
	chosen  int // index of the select rule chosen, -1 for the default
	dropped map[string]string
	budgets []budgetEval
}

type budgetEval struct{ warn, stop evalResult }

func (p *Policy) newTrace() *trace {
	return &trace{
		rules: make([]evalResult, len(p.rules)), selects: make([]evalResult, len(p.selects)),
		chosen: -1, dropped: map[string]string{}, budgets: make([]budgetEval, len(p.budgets)),
	}
}

// RecordApproval writes how an approval this policy asked for was decided
// to the decision log, if any (kernel.ApprovalRecorder).
func (p *Policy) RecordApproval(st *kernel.State, a *kernel.Approval, rec kernel.ApprovalRecord) {
	if p.opts.Log != nil {
		p.opts.Log.writeApproval(p, st, a, rec)
	}
}

// Decide rules on one call: deny > ask > allow > the default. An error in a
// deny or ask rule counts as a match (fail closed); in an allow rule, as no
// match. Dry-run rules are evaluated and reported, never acted on.
func (p *Policy) Decide(_ context.Context, st *kernel.State, c *kernel.Call) kernel.Decision {
	start := time.Now()
	spec := c.Tool() // one copy of the spec for the decision
	e := p.entry(spec.Name)
	secs := e.reads | secTool | secCall
	env := getEnv()
	env.fillSections(st, secs)
	env.fillCallSpec(c, &spec, e.extractor(spec.Schema))
	// No VM borrowed up front (as in Budget): the fast closures answer
	// the common rules, and runVM takes one from the pool only for what
	// they cannot say.
	d := p.decideIndexed(nil, env, e)
	putEnvSections(env, secs)
	d.ID = kernel.NewIDAt(start) // the decision's own clock reading
	d.EvalTime = time.Since(start)
	if p.opts.Log != nil {
		p.opts.Log.write(p, st, c, d)
	}
	return d
}

// decideIndexed decides on the call in env (m may be nil: see runVM),
// evaluating only the rules the index finds can match it. A rule it leaves out would have evaluated to
// false without an error, so the decision is the one evaluating every
// rule that applies to the tool gives (FuzzIndexedDecision holds it to
// that).
func (p *Policy) decideIndexed(m *vm.VM, env *Env, e *toolEntry) kernel.Decision {
	if e.idx == nil {
		return p.decide(m, env, &e.ruleGroups, nil)
	}
	pr := probePool.Get().(*probe)
	groupRules(&pr.groups, e.idx.candidates(p.rindex, m, env, pr))
	d := p.decide(m, env, &pr.groups, nil)
	probePool.Put(pr)
	return d
}

// decide decides on the call in env with the rules of e (every rule that
// could match it). With a trace it evaluates every rule of e; without one,
// it stops once a group (deny, then ask, then allow) has matched.
func (p *Policy) decide(m *vm.VM, env *Env, e *ruleGroups, tr *trace) kernel.Decision {
	d := kernel.Decision{Revision: p.revision, SHA256: p.sha}
	for _, r := range e.dryrun {
		if ok, _ := p.match(m, r, env, tr); ok {
			if r.effect == kernel.EffectDeny {
				d.WouldDeny = append(d.WouldDeny, r.id)
			} else {
				d.WouldAsk = append(d.WouldAsk, r.id)
			}
		}
	}
	var first *rule
	var firstErr error
	for _, group := range [...][]*rule{e.deny, e.ask, e.allow} {
		if first != nil && tr == nil {
			break
		}
		won := first != nil
		for _, r := range group {
			ok, err := p.match(m, r, env, tr)
			if !ok || won {
				continue
			}
			if first == nil {
				first, firstErr = r, err
			}
			d.Rules = append(d.Rules, r.id)
		}
	}
	if first == nil {
		d.Default = true
		d.Effect = p.defEffect
		d.Message = defaultMessage(p.defEffect)
	} else {
		d.Effect = first.effect
		d.Message = p.message(m, first, firstErr, env)
	}
	if d.Effect == kernel.EffectAsk && p.askDeny {
		d.Effect = kernel.EffectDeny
		d.Message += " (no approver: defaults.ask is deny)"
	}
	return d
}

// match evaluates a rule's when. Errors count as matches for deny and ask
// rules and as no match for allow rules.
func (p *Policy) match(m *vm.VM, r *rule, env *Env, tr *trace) (bool, error) {
	ok, err := eval(m, r.when, env)
	if tr != nil {
		tr.rules[r.index] = evalResult{ran: true, matched: ok, err: err}
	}
	if err != nil {
		return r.effect != kernel.EffectAllow, err
	}
	return ok, nil
}

func (p *Policy) message(m *vm.VM, r *rule, whenErr error, env *Env) string {
	if whenErr != nil {
		return fmt.Sprintf("rule %s could not be evaluated, so it applies (fail closed): %v", r.id, whenErr)
	}
	if r.message == nil {
		if r.effect == kernel.EffectAsk {
			return "rule " + r.id + " requires approval"
		}
		return "rule " + r.id
	}
	s, err := evalString(m, r.message, env)
	if err != nil {
		return fmt.Sprintf("rule %s (its message failed: %v)", r.id, err)
	}
	return s
}

// Surface returns the tools offered in the next generation: the tools of
// the set the first matching select rule names (surfaces.default, or every
// tool, when none matches), minus those a drop rule removes. An error in a
// select rule counts as no match; in a drop rule, as a drop (fail closed).
func (p *Policy) Surface(_ context.Context, st *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	if !p.hasSurfaces {
		return tools
	}
	env, m := borrow(st)
	out := p.surface(m, env, tools, nil)
	giveBack(env, m)
	return out
}

func (p *Policy) surface(m *vm.VM, env *Env, tools []kernel.ToolSpec, tr *trace) []kernel.ToolSpec {
	set := p.selectSet(m, env, tr)
	out := make([]kernel.ToolSpec, 0, len(tools))
	for i := range tools {
		e := p.entry(tools[i].Name)
		if set >= 0 && !e.inSet[set] {
			continue
		}
		if id := p.dropped(m, env, e, &tools[i]); id != "" {
			if tr != nil {
				tr.dropped[tools[i].Name] = id
			}
			continue
		}
		out = append(out, tools[i])
	}
	env.Tool = ToolEnv{}
	return out
}

// selectSet returns the index of the selected set, or -1 for every tool.
func (p *Policy) selectSet(m *vm.VM, env *Env, tr *trace) int {
	for i, s := range p.selects {
		ok, err := eval(m, s.when, env)
		if tr != nil {
			tr.selects[i] = evalResult{ran: true, matched: ok && err == nil, err: err}
		}
		if ok && err == nil {
			if tr != nil {
				tr.chosen = i
			}
			return s.set
		}
	}
	return p.defSet
}

func (p *Policy) dropped(m *vm.VM, env *Env, e *toolEntry, spec *kernel.ToolSpec) string {
	if len(e.drops) == 0 {
		return ""
	}
	env.fillTool(spec)
	for _, d := range e.drops {
		if ok, err := eval(m, d.when, env); ok || err != nil {
			return d.id
		}
	}
	return ""
}

// Budget checks every budget in file order. A warn_when that holds is a
// warning; the first stop_when that holds stops the run. An error in either
// counts as holding (fail closed) and its message says so.
func (p *Policy) Budget(_ context.Context, st *kernel.State, phase kernel.BudgetPhase) kernel.BudgetVerdict {
	if len(p.budgets) == 0 {
		return kernel.BudgetVerdict{}
	}
	secs := p.budgetReads()
	env := getEnv()
	// The run section field by field when the budgets name only some of
	// its fields (run.turn): the rest stays zero, and only what was
	// filled is cleared (fillRunFields).
	rf := p.budgetRun
	if secs&secRun == 0 || st == nil {
		rf = rfAll
	}
	if rf != rfAll {
		secs &^= secRun
	}
	env.fillSections(st, secs)
	if rf != rfAll {
		env.fillRunFields(st, rf)
	}
	// No VM borrowed up front: a budget's condition is usually a
	// comparison the fast closures answer; eval takes one from the pool
	// only for what they cannot say.
	v := p.budget(nil, env, phase, nil)
	if rf != rfAll {
		env.clearRunFields(rf)
	}
	putEnvSections(env, secs)
	return v
}

func (p *Policy) budget(m *vm.VM, env *Env, phase kernel.BudgetPhase, tr *trace) kernel.BudgetVerdict {
	env.Run.Phase = "before_model"
	if phase == kernel.AfterTools {
		env.Run.Phase = "after_tools"
	}
	var v kernel.BudgetVerdict
	for i, b := range p.budgets {
		var warn, stop evalResult
		if b.warn != nil {
			ok, err := eval(m, b.warn, env)
			warn = evalResult{ran: true, matched: ok || err != nil, err: err}
		}
		if b.stop != nil {
			ok, err := eval(m, b.stop, env)
			stop = evalResult{ran: true, matched: ok || err != nil, err: err}
		}
		if tr != nil {
			tr.budgets[i] = budgetEval{warn, stop}
		}
		if stop.matched && v.Stop == nil {
			v.Stop = &kernel.BudgetNotice{ID: b.id, Message: p.budgetMessage(m, b, stop.err, env), WrapUp: b.wrapUp}
		}
		if warn.matched {
			v.Warnings = append(v.Warnings, kernel.BudgetNotice{ID: b.id, Message: p.budgetMessage(m, b, warn.err, env)})
		}
	}
	return v
}

func (p *Policy) budgetMessage(m *vm.VM, b *budgetDef, condErr error, env *Env) string {
	if condErr != nil {
		return fmt.Sprintf("budget %s could not be evaluated, so it applies (fail closed): %v", b.id, condErr)
	}
	if b.msg == nil {
		return ""
	}
	s, err := evalString(m, b.msg, env)
	if err != nil {
		return fmt.Sprintf("budget %s (its message failed: %v)", b.id, err)
	}
	return s
}

var _ kernel.ApprovalRecorder = (*Policy)(nil)

var _ kernel.Policy = (*Policy)(nil)

// borrow takes a pooled Env filled from every section of st and a pooled
// VM, what Surface and the explain paths evaluate with; giveBack returns
// them. Decide and Budget fill only the sections their expressions read
// (sectionsOf) and take a VM only when the fast closures cannot answer
// (runVM).
func borrow(st *kernel.State) (*Env, *vm.VM) {
	env := getEnv()
	env.fillSections(st, secAll)
	return env, vmPool.Get().(*vm.VM)
}

func giveBack(env *Env, m *vm.VM) {
	vmPool.Put(m)
	putEnv(env)
}

// defaultMessage is a default decision's message (a constant for the
// three effects: no allocation per decision).
func defaultMessage(e kernel.Effect) string {
	switch e {
	case kernel.EffectAllow:
		return "no rule matched; the default is allow"
	case kernel.EffectAsk:
		return "no rule matched; the default is ask"
	case kernel.EffectDeny:
		return "no rule matched; the default is deny"
	}
	return "no rule matched; the default is " + string(e)
}

// budgetReads returns the State sections the budgets' expressions (and
// the vars they can inline) read, computed once.
func (p *Policy) budgetReads() sections {
	p.readsOnce.Do(func() {
		p.varSecs = p.varReads()
		srcs := make([]string, 0, 3*len(p.budgets))
		for _, b := range p.budgets {
			srcs = append(srcs, progSrc(b.warn), progSrc(b.stop), progSrc(b.msg))
		}
		p.budgetSecs = p.varSecs | sectionsOf(srcs...)
		p.budgetRun = rfAll
		if vs, ok := p.varSrcs(); ok {
			p.budgetRun = runFieldsOf(append(srcs, vs...)...)
		}
	})
	return p.budgetSecs
}

// varReads returns the State sections any var reads: an expression that
// uses v.<name> reads what the var's (inlined) source names.
func (p *Policy) varReads() sections {
	srcs, ok := p.varSrcs()
	if !ok {
		return secState
	}
	return sectionsOf(srcs...)
}

// varSrcs returns the vars' sources; ok is false when a var has no
// program (what it reads is unknown).
func (p *Policy) varSrcs() ([]string, bool) {
	srcs := make([]string, 0, len(p.vars))
	for _, v := range p.vars {
		if v.prog == nil {
			return nil, false
		}
		srcs = append(srcs, v.prog.src.Src)
	}
	return srcs, true
}

// rulesReads returns the State sections rules' expressions read, the
// vars' included.
func (p *Policy) rulesReads(rules []*rule) sections {
	p.budgetReads()
	s := p.varSecs
	for _, r := range rules {
		s |= r.readSections()
	}
	return s
}

func progSrc(pr *program) string {
	if pr == nil {
		return ""
	}
	return pr.src.Src
}
