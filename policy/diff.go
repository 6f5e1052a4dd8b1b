package policy

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/kernel"
)

// A Diff re-decides recorded sessions under two policies, OLD and NEW:
// every tool call and every surface choice (the tools offered to each
// model generation), with the state each saw rebuilt by kernel.WalkState
// (as Replay does). It collects what would change and, for both files,
// which rules no recorded call made match (coverage). The report is
// schemas/policy-diff.schema.json; `kernel policy diff` prints it.

// DiffOptions configures a Diff. The zero value compares with the
// built-in tools' specs and expects no change.
type DiffOptions struct {
	// Tools are the registered tools' specs: the surface candidates of
	// every generation (with the tools it called), and the specs of the
	// calls (tier, tags, schema). Tools not among them fall back to
	// BuiltinSpecs, then to a bare name.
	Tools []kernel.ToolSpec
	// Expect lists the changes the author means to make: a change between
	// allow and deny or ask that none of them matches is Unexpected.
	Expect []ExpectedChange
	// Redact, when set, is applied to every string of the arguments the
	// report shows (the CLI passes the credential scrubber).
	Redact func(string) string
}

// ExpectedChange matches changed decisions: from one effect to another
// ("" for any), optionally only those a rule (or select or drop rule)
// decided under either file.
type ExpectedChange struct {
	From, To kernel.Effect
	Rule     string
}

// ParseExpectedChange reads FROM:TO[@RULE], where FROM and TO are allow,
// ask, deny or any: "allow:deny@no-curl" expects calls that were allowed
// to be denied by (or to have been allowed despite) rule no-curl.
func ParseExpectedChange(s string) (ExpectedChange, error) {
	var x ExpectedChange
	pair, rule, hasRule := strings.Cut(s, "@")
	from, to, ok := strings.Cut(pair, ":")
	if !ok || hasRule && rule == "" {
		return x, fmt.Errorf("expected change %q: write FROM:TO or FROM:TO@RULE, with FROM and TO allow, ask, deny or any (e.g. allow:deny@no-curl)", s)
	}
	for _, e := range []struct {
		s   string
		dst *kernel.Effect
	}{{from, &x.From}, {to, &x.To}} {
		switch e.s {
		case "any":
		case "allow", "ask", "deny":
			*e.dst = kernel.Effect(e.s)
		default:
			return x, fmt.Errorf("expected change %q: %q is not allow, ask, deny or any", s, e.s)
		}
	}
	x.Rule = rule
	return x, nil
}

func (x ExpectedChange) String() string {
	s := cmp.Or(string(x.From), "any") + ":" + cmp.Or(string(x.To), "any")
	if x.Rule != "" {
		s += "@" + x.Rule
	}
	return s
}

func (x ExpectedChange) matches(c *DecisionChange) bool {
	if x.From != "" && x.From != c.Old.Effect || x.To != "" && x.To != c.New.Effect {
		return false
	}
	return x.Rule == "" || slices.Contains(c.Old.by(), x.Rule) || slices.Contains(c.New.by(), x.Rule)
}

// DiffReport is what a Diff found.
type DiffReport struct {
	Old PolicyRef `json:"old"`
	New PolicyRef `json:"new"`
	// Sessions counts the sessions re-decided; Calls the tool calls and
	// Surfaces the generations (surface choices) in them.
	Sessions int `json:"sessions"`
	Calls    int `json:"calls"`
	Surfaces int `json:"surfaces"`
	// Unchanged and Changed split the calls: a call is changed when its
	// effect differs (a tool the surface no longer offers is a deny).
	// SameEffectOtherRules counts unchanged calls whose deciding rules
	// differ. Unparsable counts calls whose recorded arguments are not a
	// JSON object (the kernel never decided on them); they count as
	// unchanged.
	Unchanged            int `json:"unchanged"`
	Changed              int `json:"changed"`
	SameEffectOtherRules int `json:"same_effect_other_rules"`
	Unparsable           int `json:"unparsable"`
	// Gating counts the changes between allow and deny or ask, and
	// Unexpected those of them no ExpectedChange matches.
	Gating     int      `json:"gating"`
	Unexpected int      `json:"unexpected"`
	Expected   []string `json:"expected"`
	// ByEffect and ByRule summarise the changes: per pair of effects, and
	// per rule that decided a changed call under either file.
	ByEffect       []EffectPairCount `json:"by_effect"`
	ByRule         []RuleCount       `json:"by_rule"`
	Changes        []DecisionChange  `json:"changes"`
	SurfaceChanges []SurfaceChange   `json:"surface_changes"`
	// Coverage is each file's coverage over the same calls and surfaces.
	Coverage struct {
		Old Coverage `json:"old"`
		New Coverage `json:"new"`
	} `json:"coverage"`
}

// PolicyRef names a policy file.
type PolicyRef struct {
	File     string `json:"file"`
	Name     string `json:"name"`
	Revision string `json:"revision"`
	SHA256   string `json:"sha256"`
}

func refOf(p *Policy) PolicyRef {
	return PolicyRef{File: p.file, Name: p.name, Revision: p.revision, SHA256: p.sha}
}

// EffectPairCount is how many calls changed from one effect to another.
type EffectPairCount struct {
	From  kernel.Effect `json:"from"`
	To    kernel.Effect `json:"to"`
	Count int           `json:"count"`
}

// RuleCount is how many changed calls a rule decided in a file ("old" or
// "new").
type RuleCount struct {
	Rule   string `json:"rule"`
	Policy string `json:"policy"`
	Count  int    `json:"count"`
}

// DecisionChange is one recorded call whose effect would change.
type DecisionChange struct {
	Session string `json:"session"`
	// Run and Turn locate the call: the run (user prompt) and the turn
	// (model generation) in it that asked for it.
	Run    int             `json:"run"`
	Turn   int             `json:"turn"`
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	Old    DecisionSide    `json:"old"`
	New    DecisionSide    `json:"new"`
	// Gating: the change is between allow and deny or ask. Expected: an
	// ExpectedChange matches it.
	Gating   bool `json:"gating"`
	Expected bool `json:"expected"`
}

// DecisionSide is what one file decides on a call.
type DecisionSide struct {
	Effect  kernel.Effect `json:"effect"`
	Rules   []string      `json:"rules"`
	Message string        `json:"message"`
	Default bool          `json:"default"`
	// NotOffered: the tool would not be offered in that generation, so
	// the call is denied; Surface is the set chosen and DroppedBy the drop
	// rule that removed the tool, if one did.
	NotOffered bool   `json:"not_offered"`
	Surface    string `json:"surface,omitempty"`
	DroppedBy  string `json:"dropped_by,omitempty"`
	// SelectedBy is the select rule that chose the surface ("" for the
	// default).
	SelectedBy string `json:"selected_by,omitempty"`
}

// by lists the rules that decided the call: the matched rules, or for a
// tool not offered the select and drop rules behind the surface.
func (s *DecisionSide) by() []string {
	if !s.NotOffered {
		return s.Rules
	}
	var out []string
	for _, id := range []string{s.SelectedBy, s.DroppedBy} {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// SurfaceChange is one generation whose surface would change.
type SurfaceChange struct {
	Session string      `json:"session"`
	Run     int         `json:"run"`
	Turn    int         `json:"turn"`
	Old     SurfaceSide `json:"old"`
	New     SurfaceSide `json:"new"`
	// Added and Removed are the tools NEW offers that OLD did not, and
	// the reverse.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

// SurfaceSide is the surface one file chooses for a generation.
type SurfaceSide struct {
	// Set is the chosen set ("*" for every tool), SelectedBy the select
	// rule that chose it ("" for the default).
	Set        string   `json:"set"`
	SelectedBy string   `json:"selected_by,omitempty"`
	Offered    []string `json:"offered"`
}

// Coverage is what recorded calls exercised of one file: the rules no
// call made match (dead rules), the tools whose every call only the
// default decided, and the select and drop rules that never acted.
type Coverage struct {
	Policy PolicyRef `json:"policy"`
	// Calls counts the calls the rules were asked about (calls of tools
	// the surface offered).
	Calls       int         `json:"calls"`
	DeadRules   []DeadRule  `json:"dead_rules"`
	DefaultOnly []ToolCalls `json:"default_only"`
	// DeadSelects are select rules that chose no generation's surface;
	// DeadDrops drop rules that dropped no tool.
	DeadSelects []string `json:"dead_selects"`
	DeadDrops   []string `json:"dead_drops"`
}

// DeadRule is a rule no recorded call made match.
type DeadRule struct {
	ID     string        `json:"id"`
	Line   int           `json:"line"`
	Effect kernel.Effect `json:"effect"`
	DryRun bool          `json:"dryrun"`
}

// ToolCalls is a tool and how many recorded calls of it there were.
type ToolCalls struct {
	Tool  string `json:"tool"`
	Calls int    `json:"calls"`
}

// Diff re-decides sessions under two policies. Add each session, then
// take the Report. A Diff is not safe for concurrent use.
type Diff struct {
	opts     DiffOptions
	specs    *specSet
	old, new *sideState
	rep      DiffReport
	byEffect map[[2]kernel.Effect]int
	byRule   map[[2]string]int
}

// sideState is one file's part of a Diff: the policy and its coverage
// counters.
type sideState struct {
	p        *Policy
	matched  []int
	selected []int
	dropped  map[string]bool
	calls    map[string]int // by tool: calls the rules were asked about
	byRules  map[string]int // by tool: calls a rule decided
	asked    int
	// rules is the rules part of every decision's trace, reset after each
	// (as in a run of the tests); probe the index's scratch space.
	rules []evalResult
	probe probe
}

func newSide(p *Policy) *sideState {
	return &sideState{p: p, matched: make([]int, len(p.rules)), selected: make([]int, len(p.selects)),
		dropped: map[string]bool{}, calls: map[string]int{}, byRules: map[string]int{}, rules: make([]evalResult, len(p.rules))}
}

// NewDiff starts a comparison of old and new.
func NewDiff(oldP, newP *Policy, opts DiffOptions) *Diff {
	d := &Diff{opts: opts, specs: newSpecSet(opts.Tools), old: newSide(oldP), new: newSide(newP),
		byEffect: map[[2]kernel.Effect]int{}, byRule: map[[2]string]int{}}
	d.rep.Old, d.rep.New = refOf(oldP), refOf(newP)
	d.rep.Expected = []string{}
	for _, x := range opts.Expect {
		d.rep.Expected = append(d.rep.Expected, x.String())
	}
	return d
}

// Add re-decides every tool call and surface choice of sess.
func (d *Diff) Add(ctx context.Context, sess *kernel.Session) error {
	d.rep.Sessions++
	msgs := sess.Messages
	_, err := kernel.WalkState(sess, kernel.DefaultMaxTurns, func(i int, st *kernel.State) error {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("diff session %s: %w", sess.Meta.ID, err)
			}
		}
		msg := &msgs[i]
		if msg.Role != kernel.RoleAssistant {
			return nil
		}
		d.generation(sess.Meta.ID, st, msg)
		return nil
	})
	return err
}

// surfaceOf is one file's surface for a generation, traced.
type surfaceOf struct {
	side    SurfaceSide
	offered map[string]bool
	tr      *trace
}

func (d *Diff) surface(s *sideState, st *kernel.State, cands []kernel.ToolSpec) surfaceOf {
	p := s.p
	env, m := borrow(st)
	defer giveBack(env, m)
	tr := &trace{selects: make([]evalResult, len(p.selects)), chosen: -1, dropped: map[string]string{}}
	var offered []kernel.ToolSpec
	if p.hasSurfaces {
		offered = p.surface(m, env, cands, tr)
	} else {
		offered = cands
	}
	out := surfaceOf{side: SurfaceSide{Set: p.chosenSet(tr), Offered: []string{}}, offered: map[string]bool{}, tr: tr}
	if tr.chosen >= 0 {
		out.side.SelectedBy = p.selects[tr.chosen].id
		s.selected[tr.chosen]++
	}
	for _, id := range tr.dropped {
		s.dropped[id] = true
	}
	for _, t := range offered {
		out.offered[t.Name] = true
		out.side.Offered = append(out.side.Offered, t.Name)
	}
	slices.Sort(out.side.Offered)
	return out
}

// generation re-decides one assistant message: its surface, then each of
// its calls.
func (d *Diff) generation(session string, st *kernel.State, msg *kernel.Message) {
	d.rep.Surfaces++
	cands := d.candidates(msg)
	so, sn := d.surface(d.old, st, cands), d.surface(d.new, st, cands)
	if so.side.Set != sn.side.Set || !slices.Equal(so.side.Offered, sn.side.Offered) {
		sc := SurfaceChange{Session: session, Run: st.Run, Turn: st.Turn, Old: so.side, New: sn.side, Added: []string{}, Removed: []string{}}
		for _, n := range sn.side.Offered {
			if !so.offered[n] {
				sc.Added = append(sc.Added, n)
			}
		}
		for _, n := range so.side.Offered {
			if !sn.offered[n] {
				sc.Removed = append(sc.Removed, n)
			}
		}
		d.rep.SurfaceChanges = append(d.rep.SurfaceChanges, sc)
	}
	for _, tc := range msg.ToolCalls {
		d.call(session, st, tc, so, sn)
	}
}

// candidates are the tools a generation's surface is chosen from: the
// registered tools and the tools the generation called.
func (d *Diff) candidates(msg *kernel.Message) []kernel.ToolSpec {
	var out []kernel.ToolSpec
	seen := map[string]bool{}
	add := func(s kernel.ToolSpec) {
		if !seen[s.Name] {
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	if d.opts.Tools != nil {
		for _, s := range d.opts.Tools {
			add(s)
		}
	} else {
		for _, s := range BuiltinSpecs() {
			add(s)
		}
	}
	for _, tc := range msg.ToolCalls {
		add(d.specs.get(tc.Name))
	}
	return out
}

func (d *Diff) call(session string, st *kernel.State, tc kernel.ToolCall, so, sn surfaceOf) {
	d.rep.Calls++
	spec := d.specs.get(tc.Name)
	c, err := kernel.NewCall(tc.ID, spec, json.RawMessage(tc.Arguments), st)
	if err != nil {
		d.rep.Unparsable++
		d.rep.Unchanged++
		return
	}
	before, after := d.decide(d.old, st, c, so), d.decide(d.new, st, c, sn)
	if before.Effect == after.Effect {
		d.rep.Unchanged++
		if !slices.Equal(before.by(), after.by()) {
			d.rep.SameEffectOtherRules++
		}
		return
	}
	ch := DecisionChange{Session: session, Run: st.Run, Turn: st.Turn, CallID: tc.ID, Tool: tc.Name,
		Args: d.args(c), Old: before, New: after}
	ch.Gating = (before.Effect == kernel.EffectAllow) != (after.Effect == kernel.EffectAllow)
	for _, x := range d.opts.Expect {
		if x.matches(&ch) {
			ch.Expected = true
			break
		}
	}
	d.rep.Changed++
	if ch.Gating {
		d.rep.Gating++
		if !ch.Expected {
			d.rep.Unexpected++
		}
	}
	d.byEffect[[2]kernel.Effect{before.Effect, after.Effect}]++
	for _, r := range before.by() {
		d.byRule[[2]string{r, "old"}]++
	}
	for _, r := range after.by() {
		d.byRule[[2]string{r, "new"}]++
	}
	d.rep.Changes = append(d.rep.Changes, ch)
}

// decide is one file's decision on a call, traced for coverage.
func (d *Diff) decide(s *sideState, st *kernel.State, c *kernel.Call, so surfaceOf) DecisionSide {
	p := s.p
	name := c.Tool().Name
	if !so.offered[name] {
		side := DecisionSide{Effect: kernel.EffectDeny, NotOffered: true, Rules: []string{}, Surface: so.side.Set,
			SelectedBy: so.side.SelectedBy, DroppedBy: so.tr.dropped[name]}
		side.Message = name + " would not be offered (surface " + so.side.Set + ")"
		if side.DroppedBy != "" {
			side.Message = name + " would be dropped by " + side.DroppedBy
		}
		return side
	}
	e := p.entry(name)
	env, m := borrow(st)
	defer giveBack(env, m)
	env.fillCall(c, e.extractor(c.Tool().Schema))
	g, cands := &e.ruleGroups, e.rules
	if e.idx != nil {
		cands = e.idx.candidates(p.rindex, m, env, &s.probe)
		groupRules(&s.probe.groups, cands)
		g = &s.probe.groups
	}
	tr := &trace{rules: s.rules}
	dec := p.decide(m, env, g, tr)
	s.asked++
	s.calls[name]++
	for _, r := range cands {
		if e := s.rules[r.index]; e.ran && (e.matched || e.err != nil && r.effect != kernel.EffectAllow) {
			s.matched[r.index]++
		}
		s.rules[r.index] = evalResult{}
	}
	if !dec.Default {
		s.byRules[name]++
	}
	return DecisionSide{Effect: dec.Effect, Rules: nonNil(dec.Rules), Message: dec.Message, Default: dec.Default}
}

// args is the call's arguments for the report, redacted.
func (d *Diff) args(c *kernel.Call) json.RawMessage {
	var v any = c.Value()
	if d.opts.Redact != nil {
		v = redactValue(v, d.opts.Redact)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

// Report returns what the Diff found so far.
func (d *Diff) Report() *DiffReport {
	rep := d.rep
	rep.Changes = nonNil(rep.Changes)
	rep.SurfaceChanges = nonNil(rep.SurfaceChanges)
	rep.ByEffect = []EffectPairCount{}
	for k, n := range d.byEffect {
		rep.ByEffect = append(rep.ByEffect, EffectPairCount{From: k[0], To: k[1], Count: n})
	}
	slices.SortFunc(rep.ByEffect, func(a, b EffectPairCount) int {
		return cmp.Or(b.Count-a.Count, strings.Compare(string(a.From), string(b.From)), strings.Compare(string(a.To), string(b.To)))
	})
	rep.ByRule = []RuleCount{}
	for k, n := range d.byRule {
		rep.ByRule = append(rep.ByRule, RuleCount{Rule: k[0], Policy: k[1], Count: n})
	}
	slices.SortFunc(rep.ByRule, func(a, b RuleCount) int {
		return cmp.Or(b.Count-a.Count, strings.Compare(a.Rule, b.Rule), strings.Compare(a.Policy, b.Policy))
	})
	rep.Coverage.Old, rep.Coverage.New = d.old.coverage(), d.new.coverage()
	return &rep
}

func (s *sideState) coverage() Coverage {
	p := s.p
	c := Coverage{Policy: refOf(p), Calls: s.asked, DeadRules: []DeadRule{}, DefaultOnly: []ToolCalls{},
		DeadSelects: []string{}, DeadDrops: []string{}}
	for i, r := range p.rules {
		if s.matched[i] == 0 {
			c.DeadRules = append(c.DeadRules, DeadRule{ID: r.id, Line: r.at.Line, Effect: r.effect, DryRun: r.dryrun})
		}
	}
	for _, tool := range sortedKeys(s.calls) {
		if s.byRules[tool] == 0 {
			c.DefaultOnly = append(c.DefaultOnly, ToolCalls{Tool: tool, Calls: s.calls[tool]})
		}
	}
	for i, sel := range p.selects {
		if s.selected[i] == 0 {
			c.DeadSelects = append(c.DeadSelects, sel.id)
		}
	}
	for _, dr := range p.drops {
		if !s.dropped[dr.id] {
			c.DeadDrops = append(c.DeadDrops, dr.id)
		}
	}
	return c
}

// nonNil is s, or an empty slice for nil (JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
