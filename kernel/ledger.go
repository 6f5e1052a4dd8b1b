package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Budget caps what one run may spend: its own model calls and those of
// every run it delegates to, charged to it as they happen. A zero field
// sets no cap.
type Budget struct {
	// CostUSD caps the cost in US dollars, priced as Config.Prices price
	// each model.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Tokens caps the tokens, input and output.
	Tokens int64 `json:"tokens,omitempty"`
	// Time caps the wall time from the run's start.
	Time time.Duration `json:"time,omitempty"`
}

// The ids of the stops a Budget makes: a run stops with "budget:<id>" when
// its next model call would not fit its own cap or an ancestor's (the
// event's message says whose).
const (
	BudgetCostID   = "agent.cost_usd"
	BudgetTokensID = "agent.tokens"
	BudgetTimeID   = "agent.time"
)

// IsZero reports whether b sets no cap.
func (b Budget) IsZero() bool { return b == Budget{} }

func (b Budget) check() error {
	if b.CostUSD < 0 || b.Tokens < 0 || b.Time < 0 {
		return errors.New("caps must not be negative")
	}
	return nil
}

// ErrBudget is wrapped by the error of an agent call refused because what
// its first model call would cost does not fit what its caller has left.
var ErrBudget = errors.New("not enough budget left")

// ledger is what one run has spent, with what the runs it delegated to
// spent, and its cap: a node of the tree of a top-level run and its
// descendants. Every node of a tree shares one lock. A child's spend is
// charged to every ancestor at once, so a sibling, a grandchild or the
// caller itself sees it before its next model call; the run owning a node
// moves its descendants' spend into its State (fold) at its next step,
// on its own goroutine, so that its policy budgets, its totals and its
// stored metadata count it.
type ledger struct {
	mu     *sync.Mutex
	parent *ledger
	// name is the agent of the run, for messages.
	name  string
	limit Budget
	start time.Time // monotonic
	// spent is the run's spend and its descendants'; unfolded the
	// descendants' not folded into the run's State yet.
	spent    Totals
	unfolded Totals
	// reserved is what the model calls in flight of the run and its
	// descendants were admitted at (their predictions), until charged;
	// held is the run's own share of it (a run has one call in flight at
	// most). admit counts reserved, so siblings admitted together cannot
	// each spend what only one of them may.
	reserved Totals
	held     Totals
	// maxOut is the largest output of one of the run's generations: the
	// prediction of the next one's.
	maxOut int64
	// policy evaluates the run's policy budgets on its state with extra
	// spend added; nil without a policy. Descendants call it before their
	// model calls, while the run waits for their round (its state does
	// not change meanwhile).
	policy func(extra Totals) *BudgetNotice
}

func newLedger(name string, limit Budget, start time.Time) *ledger {
	return &ledger{mu: new(sync.Mutex), name: name, limit: limit, start: start}
}

// child is the node of a run l's run delegates to.
func (l *ledger) child(name string, limit Budget, start time.Time) *ledger {
	return &ledger{mu: l.mu, parent: l, name: name, limit: limit, start: start}
}

// charge records a model call (or a summary) of l's run: its usage and
// cost count for l and every ancestor at once, and what its admission
// reserved is released.
func (l *ledger) charge(u Usage, cost float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unhold()
	l.spent.add(u, cost)
	if u.OutputTokens > l.maxOut {
		l.maxOut = u.OutputTokens
	}
	for n := l.parent; n != nil; n = n.parent {
		n.spent.add(u, cost)
		n.unfolded.add(u, cost)
	}
}

// unhold releases what l's run holds reserved, from l and every
// ancestor. l.mu is held.
func (l *ledger) unhold() {
	if l.held == (Totals{}) {
		return
	}
	neg := Totals{Usage: Usage{InputTokens: -l.held.Usage.InputTokens}, CostUSD: -l.held.CostUSD}
	for n := l; n != nil; n = n.parent {
		n.reserved.add(neg.Usage, neg.CostUSD)
	}
	l.held = Totals{}
}

// release gives back what l's run holds reserved: its call ended without
// a charge (it failed, or the run ended).
func (l *ledger) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unhold()
}

// fold moves what l's descendants spent since the last fold into st.
func (l *ledger) fold(st *State) {
	l.mu.Lock()
	u := l.unfolded
	l.unfolded = Totals{}
	l.mu.Unlock()
	if u != (Totals{}) {
		st.account(u.Usage, u.CostUSD)
	}
}

// left is what l's run may still spend: the least of what each cap from l
// up leaves (negative caps are none: -1).
func (l *ledger) left(now time.Time) (cost float64, tokens int64, t time.Duration) {
	cost, tokens, t = -1, -1, -1
	l.mu.Lock()
	defer l.mu.Unlock()
	for n := l; n != nil; n = n.parent {
		if c := n.limit.CostUSD; c > 0 && (cost < 0 || c-n.spent.CostUSD < cost) {
			cost = max(c-n.spent.CostUSD, 0)
		}
		if c := n.limit.Tokens; c > 0 && (tokens < 0 || c-n.spent.Usage.total() < tokens) {
			tokens = max(c-n.spent.Usage.total(), 0)
		}
		if c := n.limit.Time; c > 0 && (t < 0 || c-now.Sub(n.start) < t) {
			t = max(c-now.Sub(n.start), 0)
		}
	}
	return cost, tokens, t
}

// admit checks a model call predicted to cost cost and take tokens
// against every cap from l up (counting what calls in flight elsewhere in
// the tree reserved), and the policy budgets of l's ancestors with what
// their descendants spent since their state was taken. It returns the
// notice of the first that does not fit, or nil; when the call fits, its
// prediction stays reserved on l and every ancestor until charge or
// release (replacing what l's run held before).
func (l *ledger) admit(cost float64, tokens int64, now time.Time) *BudgetNotice {
	type check struct {
		name   string
		policy func(Totals) *BudgetNotice
		extra  Totals
	}
	var checks []check
	l.mu.Lock()
	l.unhold()
	for n := l; n != nil; n = n.parent {
		whose := "its own budget"
		if n != l {
			whose = n.name + "'s budget (an agent it was delegated by)"
		}
		// A notice's figures are read under the lock, like the checks:
		// the tree's other runs change them as they charge and release.
		if c := n.limit.CostUSD; c > 0 && n.spent.CostUSD+n.reserved.CostUSD+cost > c {
			b := &BudgetNotice{ID: BudgetCostID, Message: fmt.Sprintf("%s has $%.4f of $%.4f left (%s), and the next model call would cost about $%.4f", whose, max(c-n.spent.CostUSD-n.reserved.CostUSD, 0), c, inFlight(n.reserved.CostUSD), cost)}
			l.mu.Unlock()
			return b
		}
		if c := n.limit.Tokens; c > 0 && n.spent.Usage.total()+n.reserved.Usage.InputTokens+tokens > c {
			b := &BudgetNotice{ID: BudgetTokensID, Message: fmt.Sprintf("%s has %d of %d tokens left (%d held by calls in flight), and the next model call would take about %d", whose, max(c-n.spent.Usage.total()-n.reserved.Usage.InputTokens, 0), c, n.reserved.Usage.InputTokens, tokens)}
			l.mu.Unlock()
			return b
		}
		if c := n.limit.Time; c > 0 && now.Sub(n.start) >= c {
			l.mu.Unlock()
			return &BudgetNotice{ID: BudgetTimeID, Message: fmt.Sprintf("%s of %s is used up", whose, c)}
		}
		if n != l && n.policy != nil {
			checks = append(checks, check{n.name, n.policy, n.unfolded})
		}
	}
	if cost > 0 || tokens > 0 {
		// Tokens are held as InputTokens: only their total counts.
		l.held = Totals{Usage: Usage{InputTokens: tokens}, CostUSD: cost}
		for n := l; n != nil; n = n.parent {
			n.reserved.add(l.held.Usage, l.held.CostUSD)
		}
	}
	l.mu.Unlock()
	for _, c := range checks {
		if stop := c.policy(c.extra); stop != nil {
			l.release()
			b := *stop
			b.WrapUp = false // the wrap-up is the caller's, not the child's
			if b.Message == "" {
				b.Message = "a budget of " + c.name + " (an agent it was delegated by) is exhausted"
			}
			return &b
		}
	}
	return nil
}

// inFlight says what calls in flight hold of a cost cap.
func inFlight(c float64) string {
	if c <= 0 {
		return "none held by calls in flight"
	}
	return fmt.Sprintf("$%.4f held by calls in flight", c)
}

// total is input plus output tokens.
func (u Usage) total() int64 { return u.InputTokens + u.OutputTokens }

// ledger returns the run's node, making it when the run has none yet (a
// top-level run without a cap that delegates).
func (r *run) ledger() *ledger {
	if r.led == nil {
		r.led = newLedger(r.st.Agent.Name, r.k.cfg.Budget, r.started)
		r.setLedgerPolicy()
	}
	return r.led
}

// setLedgerPolicy lets descendants evaluate r's policy budgets.
func (r *run) setLedgerPolicy() {
	p := r.k.cfg.Policy
	if p == nil {
		return
	}
	r.led.policy = func(extra Totals) *BudgetNotice {
		st := r.st
		st.account(extra.Usage, extra.CostUSD)
		st.Now = r.k.cfg.Now()
		return p.Budget(context.Background(), &st, BeforeModel).Stop
	}
}

// checkLedger stops a run that went deeper than its kernel allows, and one
// whose next model call does not fit its budget or an ancestor's.
func (r *run) checkLedger(ctx context.Context, phase BudgetPhase) (res *RunResult, err error, stop bool) {
	if phase == BeforeModel && r.st.Agent.Depth > r.k.maxDepth() {
		r.k.emitIf(func() Event {
			return Notice{Source: "agents", Level: "warn", Text: fmt.Sprintf("agent %s stopped: depth %d is deeper than the limit %d (chain %v)", r.st.Agent.Name, r.st.Agent.Depth, r.k.maxDepth(), r.st.Agent.Chain)}
		})
		res, err := r.done(ctx, StopMaxDepth, "")
		return res, err, true
	}
	if r.led == nil {
		return nil, nil, false
	}
	r.led.fold(&r.st)
	var cost float64
	var tokens int64
	if phase == BeforeModel {
		tokens = int64(r.nextInput())
		r.led.mu.Lock()
		out := r.led.maxOut
		r.led.mu.Unlock()
		cost = r.k.price(r.k.cfg.Model).Cost(Usage{InputTokens: tokens, OutputTokens: out})
		tokens += out
	}
	b := r.led.admit(cost, tokens, time.Now())
	if b == nil {
		return nil, nil, false
	}
	n := *b
	r.k.emitIf(func() Event { return BudgetExceeded{n} })
	res, err = r.done(ctx, BudgetStop(n.ID), "")
	return res, err, true
}

// nextInput estimates the input tokens of the run's next request: the
// history and every tool (compaction and the policy's surface can only
// make it smaller), no more than the context window.
func (r *run) nextInput() int {
	if r.cx != nil {
		n := r.calibrated(r.cx.sum + r.cx.toolSum + perReply)
		if w := r.k.cfg.ContextWindow; w > 0 && n > w {
			n = w
		}
		return n
	}
	return countRequest(r.k.cfg.Tokenizer, r.msgs, r.k.cfg.Tools.view())
}
