package policy

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestReport is the outcome of a policy file's own tests.
type TestReport struct {
	File     string
	Policy   string
	Revision string
	Results  []TestResult
	// Untested lists the rules, select and drop rules and budgets that no
	// test exercised; a policy with any does not load.
	Untested []Problem
	// Evaluated counts the rules the tests' decisions evaluated: with the
	// index, about one per test for a file of one rule per test.
	Evaluated int
}

// TestResult is one test's outcome.
type TestResult struct {
	Name string
	// Line and Col locate the test's name in the file.
	Line, Col int
	// Failures say what differed, e.g. "decision = allow, want deny".
	Failures []string
}

// Passed reports whether the test passed.
func (r *TestResult) Passed() bool { return len(r.Failures) == 0 }

// Passed reports whether every test passed and everything was exercised.
func (r *TestReport) Passed() bool {
	if len(r.Untested) > 0 {
		return false
	}
	for i := range r.Results {
		if !r.Results[i].Passed() {
			return false
		}
	}
	return true
}

// Failed counts the failing tests.
func (r *TestReport) Failed() int {
	n := 0
	for i := range r.Results {
		if !r.Results[i].Passed() {
			n++
		}
	}
	return n
}

// Format writes the report the way `go test` does: failing tests with
// their failures (every test with -v), untested items, then one summary
// line, "ok  \tFILE\tN tests" or "FAIL\tFILE\t...".
func (r *TestReport) Format(w io.Writer, verbose bool) error {
	var b strings.Builder
	base := filepath.Base(r.File)
	for _, t := range r.Results {
		name := strings.ReplaceAll(t.Name, " ", "_")
		if verbose {
			fmt.Fprintf(&b, "=== RUN   %s\n", name)
		}
		if t.Passed() {
			if verbose {
				fmt.Fprintf(&b, "--- PASS: %s\n", name)
			}
			continue
		}
		fmt.Fprintf(&b, "--- FAIL: %s\n", name)
		for _, f := range t.Failures {
			fmt.Fprintf(&b, "    %s:%d: %s\n", base, t.Line, f)
		}
	}
	for _, u := range r.Untested {
		fmt.Fprintf(&b, "--- FAIL: coverage\n    %s:%d: %s: %s\n", base, u.Line, u.Where, u.Msg)
	}
	if r.Passed() {
		fmt.Fprintf(&b, "ok  \t%s\t%d tests\n", r.File, len(r.Results))
	} else {
		fmt.Fprintf(&b, "FAIL\t%s\t%d tests, %d failed", r.File, len(r.Results), r.Failed())
		if len(r.Untested) > 0 {
			fmt.Fprintf(&b, ", %d untested", len(r.Untested))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// coverage counts what the tests exercised.
type coverage struct {
	rules, selects, drops, budgets, memory []int
}

// RunTests runs the file's own tests (the tests: section) and reports what
// they did not exercise. It never uses the decision log. It stops early
// with ctx's error when ctx is done (the report is then incomplete).
//
// The tests run in parallel, on up to GOMAXPROCS goroutines, and each
// evaluates only the rules the index finds can match its call, so the run
// is linear in the number of tests and rules, not their product; the
// report is the one evaluating every rule, one test after the other, would
// give.
func (p *Policy) RunTests(ctx context.Context) (*TestReport, error) {
	return p.runTests(ctx, true)
}

// testChunk is how many tests a goroutine takes at a time (and how often
// it checks for cancellation).
const testChunk = 64

// progressEvery is how often runTests reports progress (Options.Progress).
const progressEvery = 100 * time.Millisecond

// runTests runs the tests, with each test's candidate rules from the
// index, or (indexed false, the reference the tests compare with) every
// rule that applies to the call's tool.
func (p *Policy) runTests(ctx context.Context, indexed bool) (*TestReport, error) {
	p.loadTests(nil)
	rep := &TestReport{File: p.file, Policy: p.name, Revision: p.revision, Results: make([]TestResult, len(p.tests))}
	if len(p.testProblems) > 0 {
		// Only for a policy Load took from the cache: Compile and a load
		// that runs the tests report these problems themselves.
		bad := TestResult{Name: "tests:"}
		for _, pr := range p.testProblems {
			bad.Failures = append(bad.Failures, pr.String())
		}
		rep.Results = append(rep.Results, bad)
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), (len(p.tests)+testChunk-1)/testChunk))
	runs := make([]*testRun, workers)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for w := range runs {
		run := p.newTestRun(indexed)
		runs[w] = run
		wg.Go(func() {
			for ctx.Err() == nil {
				start := int(next.Add(testChunk)) - testChunk
				if start >= len(p.tests) {
					return
				}
				end := min(start+testChunk, len(p.tests))
				for i := start; i < end; i++ {
					rep.Results[i] = p.runTest(run, &p.tests[i])
				}
				done.Add(int64(end - start))
			}
		})
	}
	p.waitTests(&wg, &done)
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	cov := runs[0].cov
	for _, run := range runs[1:] {
		cov.add(run.cov)
	}
	for _, run := range runs {
		rep.Evaluated += run.evaluated
	}
	rep.Untested = p.untested(cov)
	return rep, nil
}

// waitTests waits for the goroutines running the tests, reporting their
// progress to Options.Progress meanwhile (and once at the end).
func (p *Policy) waitTests(wg *sync.WaitGroup, done *atomic.Int64) {
	if p.opts.Progress == nil {
		wg.Wait()
		return
	}
	finished := make(chan struct{})
	go func() { // owned by waitTests, which waits for it below
		wg.Wait()
		close(finished)
	}()
	start := time.Now()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	report := func(end bool) {
		p.opts.Progress(TestProgress{File: p.file, Done: int(done.Load()), Total: len(p.tests), Elapsed: time.Since(start), End: end})
	}
	for {
		select {
		case <-finished:
			report(true)
			return
		case <-tick.C:
			report(false)
		}
	}
}

// TestProgress says how far a run of a policy's tests has got (see
// Options.Progress).
type TestProgress struct {
	File        string
	Done, Total int
	// Elapsed is the time since the tests started.
	Elapsed time.Duration
	// End is set on the last report of the run: the tests finished or were
	// cancelled.
	End bool
}

// untested lists what the tests did not exercise.
func (p *Policy) untested(cov *coverage) []Problem {
	var out []Problem
	where := func(kind, id string) string { return kind + " " + quote(id) }
	for i, r := range p.rules {
		if cov.rules[i] == 0 {
			out = append(out, p.problem(StageLint, r.at, where("rule", r.id), "no test makes this rule match; add a test whose input it matches"))
		}
	}
	for i, s := range p.selects {
		if cov.selects[i] == 0 {
			out = append(out, p.problem(StageLint, s.at, where("select", s.id), "no test selects this surface; add a test with expect.surface"))
		}
	}
	for i, d := range p.drops {
		if cov.drops[i] == 0 {
			out = append(out, p.problem(StageLint, d.at, where("drop", d.id), "no test sees this rule drop a tool; add a test with expect.not_offered"))
		}
	}
	for i, b := range p.budgets {
		if cov.budgets[i] == 0 {
			out = append(out, p.problem(StageLint, b.at, where("budget", b.id), "no test makes this budget warn or stop; add a test with expect.stop or expect.warnings"))
		}
	}
	for i, r := range p.memRules {
		if cov.memory[i] == 0 {
			out = append(out, p.problem(StageLint, r.at, where("memory rule", r.id), "no test makes this memory rule match; add a test with input.memory and expect.memory or expect.dropped"))
		}
	}
	return out
}

func (c *coverage) add(o *coverage) {
	for _, pair := range [][2][]int{{c.rules, o.rules}, {c.selects, o.selects}, {c.drops, o.drops}, {c.budgets, o.budgets}, {c.memory, o.memory}} {
		for i, n := range pair[1] {
			pair[0][i] += n
		}
	}
}

// testRun is what the tests one goroutine runs share: nothing in it is
// shared with another goroutine.
type testRun struct {
	m       *vm.VM
	cov     *coverage
	indexed bool
	probe   probe
	// rules is the rules part of every test's trace, reset after each test
	// (only the rules a test evaluated are set), so a test costs what it
	// evaluates, not the size of the file.
	rules []evalResult
	// entries caches the policy's tool entries (which stops caching past
	// maxEntries tools); ex the argument extractors, by tool name.
	entries map[string]*toolEntry
	ex      map[string]*toolEntry
	// evaluated counts the rules the decisions evaluated.
	evaluated int
}

func (p *Policy) newTestRun(indexed bool) *testRun {
	return &testRun{
		m: new(vm.VM), indexed: indexed, rules: make([]evalResult, len(p.rules)),
		entries: map[string]*toolEntry{}, ex: map[string]*toolEntry{},
		cov: &coverage{
			rules: make([]int, len(p.rules)), selects: make([]int, len(p.selects)),
			drops: make([]int, len(p.drops)), budgets: make([]int, len(p.budgets)), memory: make([]int, len(p.memRules)),
		},
	}
}

func (run *testRun) entry(p *Policy, name string) *toolEntry {
	e, ok := run.entries[name]
	if !ok {
		e = p.entry(name)
		run.entries[name] = e
	}
	return e
}

// trace returns a trace for one test, sharing run.rules.
func (run *testRun) trace(p *Policy) *trace {
	return &trace{
		rules: run.rules, selects: make([]evalResult, len(p.selects)),
		chosen: -1, dropped: map[string]string{}, budgets: make([]budgetEval, len(p.budgets)),
	}
}

func (run *testRun) extractor(name string, schema []byte) *extractor {
	e, ok := run.ex[name]
	if !ok {
		e = &toolEntry{}
		run.ex[name] = e
	}
	return e.extractor(schema)
}

func (p *Policy) problem(stage Stage, at pos, where, msg string) Problem {
	pr := Problem{File: p.file, Line: at.Line, Col: at.Col, Stage: stage, Where: where, Msg: msg}
	if at.Line > 0 && at.Line <= len(p.lines) {
		pr.Source = p.lines[at.Line-1]
	}
	return pr
}

// runTest runs one test: each kind of expectation it sets (a decision, a
// surface, budgets) is checked against its own evaluation of the input.
func (p *Policy) runTest(run *testRun, t *testDoc) TestResult {
	res := TestResult{Name: t.Name.V, Line: t.Name.At.Line, Col: t.Name.At.Col}
	c := &testCheck{run: run, in: &t.Input, x: &t.Expect, st: t.Input.state(), res: &res}
	if c.x.wantsDecision() {
		p.checkDecision(c)
	}
	if c.x.wantsSurface() {
		p.checkSurface(c)
	}
	if c.x.wantsBudget() {
		p.checkBudget(c)
	}
	if c.x.wantsMemory() {
		p.checkMemory(c)
	}
	if c.x.wantsExclusion() {
		p.checkExclude(c)
	}
	return res
}

// testCheck is one test being run: its input, expectations, the state
// built from the input, and the result its checks add failures to.
type testCheck struct {
	run *testRun
	in  *Input
	x   *expectDoc
	st  *kernel.State
	res *TestResult
}

func (c *testCheck) fail(format string, a ...any) {
	c.res.Failures = append(c.res.Failures, fmt.Sprintf(format, a...))
}

// env is a fresh environment filled from the test's state.
func (c *testCheck) env() *Env {
	env := new(Env)
	env.fillState(c.st)
	return env
}

// checkDecision decides on the test's call, counts the rules that matched
// towards coverage, and compares the decision with the expectations.
func (p *Policy) checkDecision(c *testCheck) {
	call, err := c.in.call(p.specs, c.st)
	if err != nil {
		c.fail("%v", err)
		return
	}
	d, cands, tr := p.decideTest(c.run, c.env(), call)
	// The trace's rules are shared by the run's tests: reset what this
	// test set, whatever happens below.
	defer c.run.resetRules(cands)
	for _, r := range cands {
		if e := tr.rules[r.index]; e.ran && (e.matched || e.err != nil && r.effect != kernel.EffectAllow) {
			c.run.cov.rules[r.index]++
		}
	}
	x := c.x
	if x.Decision.Set && string(d.Effect) != x.Decision.V {
		c.fail("decision = %s, want %s (%s)", d.Effect, x.Decision.V, d.Message)
	}
	compareSet(c.fail, "rules", d.Rules, x.Rules)
	compareSet(c.fail, "would_deny", d.WouldDeny, x.WouldDeny)
	compareSet(c.fail, "would_ask", d.WouldAsk, x.WouldAsk)
	if x.Default != nil && d.Default != *x.Default {
		c.fail("default = %t, want %t", d.Default, *x.Default)
	}
	if x.Message != nil && d.Message != *x.Message {
		c.fail("message = %q, want %q", d.Message, *x.Message)
	}
	if x.MessageContains != nil && !strings.Contains(d.Message, *x.MessageContains) {
		c.fail("message = %q, want it to contain %q", d.Message, *x.MessageContains)
	}
	for _, r := range cands { // they all apply to the tool
		if err := tr.rules[r.index].err; err != nil {
			c.fail("rule %s: %v", r.id, err)
		}
	}
}

// decideTest decides on a test's call, tracing every candidate rule: those
// the index finds for the call, or (without an index) every rule that
// applies to the tool.
func (p *Policy) decideTest(run *testRun, env *Env, call *kernel.Call) (kernel.Decision, []*rule, *trace) {
	name := call.Tool().Name
	env.fillCall(call, run.extractor(name, call.Tool().Schema))
	e := run.entry(p, name)
	g := &e.ruleGroups
	cands := e.rules
	if run.indexed && e.idx != nil {
		cands = e.idx.candidates(p.rindex, run.m, env, &run.probe)
		g = &run.probe.groups
		groupRules(g, cands)
	}
	run.evaluated += len(cands)
	tr := run.trace(p)
	return p.decide(run.m, env, g, tr), cands, tr
}

// resetRules clears what a test's decision left in the shared trace.
func (run *testRun) resetRules(cands []*rule) {
	for _, r := range cands {
		run.rules[r.index] = evalResult{}
	}
}

// checkSurface chooses the surface for the test's input over the tools it
// names, counts the select and drop rules that acted towards coverage, and
// compares the surface with the expectations.
func (p *Policy) checkSurface(c *testCheck) {
	x := c.x
	names := slices.Concat(c.in.Tools, x.Offered, x.NotOffered)
	sort.Strings(names)
	names = slices.Compact(names)
	specs := make([]kernel.ToolSpec, len(names))
	for i, n := range names {
		specs[i] = p.specs.get(n)
	}
	tr := c.run.trace(p)
	offered := p.surface(c.run.m, c.env(), specs, tr)
	chosen := p.chosenSet(tr)
	if tr.chosen >= 0 {
		c.run.cov.selects[tr.chosen]++
	}
	for i, d := range p.drops {
		for _, id := range tr.dropped {
			if id == d.id {
				c.run.cov.drops[i]++
			}
		}
	}
	if x.Surface != nil && chosen != *x.Surface {
		c.fail("surface = %s, want %s", chosen, *x.Surface)
	}
	have := map[string]bool{}
	for _, s := range offered {
		have[s.Name] = true
	}
	for _, n := range x.Offered {
		if !have[n] {
			why := "not in surface " + chosen
			if id, ok := tr.dropped[n]; ok {
				why = "dropped by " + id
			}
			c.fail("%s is not offered (%s), want it offered", n, why)
		}
	}
	for _, n := range x.NotOffered {
		if have[n] {
			c.fail("%s is offered, want it not offered", n)
		}
	}
	for i, r := range tr.selects {
		if r.err != nil {
			c.fail("select %s: %v", p.selects[i].id, r.err)
		}
	}
}

// chosenSet names the set a traced surface chose: "*" for every tool.
func (p *Policy) chosenSet(tr *trace) string {
	set := p.defSet
	if tr.chosen >= 0 {
		set = p.selects[tr.chosen].set
	}
	if set < 0 {
		return "*"
	}
	return p.sets[set].name
}

// checkBudget checks the budgets for the test's input and phase, counts
// those that warned or stopped towards coverage, and compares the verdict
// with the expectations.
func (p *Policy) checkBudget(c *testCheck) {
	x := c.x
	tr := c.run.trace(p)
	v := p.budget(c.run.m, c.env(), c.in.phase(), tr)
	for i, b := range tr.budgets {
		if b.warn.matched || b.stop.matched {
			c.run.cov.budgets[i]++
		}
		for _, r := range []evalResult{b.warn, b.stop} {
			if r.err != nil {
				c.fail("budget %s: %v", p.budgets[i].id, r.err)
			}
		}
	}
	stop := "none"
	if v.Stop != nil {
		stop = v.Stop.ID
	}
	if x.Stop != nil {
		want := *x.Stop
		if want == "" {
			want = "none"
		}
		if stop != want {
			c.fail("stop = %s, want %s", stop, want)
		}
	}
	var warned []string
	for _, w := range v.Warnings {
		warned = append(warned, w.ID)
	}
	compareSet(c.fail, "warnings", warned, x.Warnings)
	if x.WrapUp != nil {
		got := v.Stop != nil && v.Stop.WrapUp
		if got != *x.WrapUp {
			c.fail("wrap_up = %t, want %t", got, *x.WrapUp)
		}
	}
}

func compareSet(fail func(string, ...any), what string, got []string, want *[]string) {
	if want == nil {
		return
	}
	g := slices.Clone(got)
	w := slices.Clone(*want)
	sort.Strings(g)
	sort.Strings(w)
	if !slices.Equal(g, w) {
		fail("%s = [%s], want [%s]", what, strings.Join(g, ", "), strings.Join(w, ", "))
	}
}
