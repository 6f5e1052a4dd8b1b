package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrChildSession is returned for a run, an approval or a resume asked
// directly of a child session: it runs only through the call of its
// parent that started it (approve the parent's approval; continue the
// parent).
var ErrChildSession = errors.New("session is a child session")

// delegationKey is the context key of an agent call's delegation.
type delegationKey struct{}

// delegation is one agent call on its way through the pipeline: prepare
// makes it for a call of an agent tool, core hands it to the tool in the
// call's context, and finish reads what the child did.
type delegation struct {
	parent *run
	callID string
	// seq is the parent's assistant message that made the call.
	seq uint64
	// resolve is the decision on the child's pending approval when the
	// call runs again because a person decided it (Resolve, reject).
	resolve *resolution
	// repair: the call is answered by repair after the kernel stopped
	// while it ran; a child that never started is not started now.
	repair bool

	// child is what ran, for the tool message; pending is the approval the
	// child stopped for.
	child   *ChildRun
	pending *Approval
}

// resolution is a person's decision on a child's pending approval.
type resolution struct {
	approve bool
	note    string
}

// childScope is what the Kernel view a child run runs on carries from its
// caller.
type childScope struct {
	led *ledger
}

// delegation returns the delegation of call tc of the run when tc calls
// an agent tool t.
func (r *run) delegation(tc ToolCall, approved bool) *delegation {
	d := &delegation{parent: r, callID: tc.ID, seq: r.callSeq()}
	if approved {
		d.resolve = r.resolving
	}
	return d
}

// callSeq is the seq of the last assistant message: the one whose calls
// the run dispatches, resolves or repairs.
func (r *run) callSeq() uint64 {
	for i := len(r.msgs) - 1; i >= r.sysN; i-- {
		if r.msgs[i].Role == RoleAssistant {
			return r.msgs[i].Seq
		}
	}
	return 0
}

// run runs the call: the agent's child session, started, resumed or
// decided, and its outcome as the call's result.
func (d *delegation) run(ctx context.Context, t *agentTool, prompt string) (Result, error) {
	p := d.parent
	a := &t.a
	ck := a.Kernel
	id := ChildSessionID(p.meta.ID, d.seq, d.callID)
	link := ParentLink{SessionID: p.meta.ID, CallID: d.callID, Seq: d.seq, Agent: p.st.Agent.Name,
		Depth: p.st.Agent.Depth + 1, Chain: append(slices.Clone(p.st.Agent.Chain), a.Name)}
	fail := func(code string, err error) (Result, error) {
		return Result{}, &ToolError{Tool: t.spec.Name, Code: code, Err: err}
	}
	sess, err := ck.cfg.Store.Load(ctx, id)
	switch {
	case errors.Is(err, ErrSessionNotFound):
		sess = nil
	case err != nil:
		return fail("tool_error", fmt.Errorf("agent %s: load its session %s: %w", a.Name, id, err))
	case sess.Meta.Parent == nil || sess.Meta.Parent.SessionID != link.SessionID || sess.Meta.Parent.CallID != link.CallID:
		return fail("tool_error", fmt.Errorf("agent %s: session %s exists and is not this call's child", a.Name, id))
	}
	led := p.ledger().child(a.Name, ck.cfg.Budget, time.Now())
	defer led.release() // a call of the child's that failed uncharged
	fresh := sess == nil || len(sess.Messages) == 0
	if fresh && d.repair {
		return Result{Content: InterruptedNotRun + "the agent " + a.Name + " had not started", IsError: true}, nil
	}
	if sess == nil {
		if d.repair {
			return Result{Content: InterruptedNotRun + "the agent " + a.Name + " had not started", IsError: true}, nil
		}
		if link.Depth <= ck.maxDepth() {
			cost, tokens := ck.firstCall(prompt)
			if b := led.admit(cost, tokens, time.Now()); b != nil {
				return fail("budget", fmt.Errorf("%w: agent %s was not started: %s (budget:%s)", ErrBudget, a.Name, b.Message, b.ID))
			}
		}
		now := ck.cfg.Now()
		meta := SessionMeta{ID: id, Title: truncateTitle(prompt), Model: ck.cfg.Model, Status: StatusIdle, Created: now, Updated: now,
			Agent: a.Name, Parent: &link, Context: ck.cfg.SessionContext}
		if err := ck.cfg.Store.Commit(ctx, id, Step{Meta: meta}); err != nil {
			return fail("tool_error", fmt.Errorf("agent %s: create its session: %w", a.Name, err))
		}
	}
	v, release, err := ck.childView(ctx, p, d, a, led, id, link.Depth)
	if err != nil {
		return fail("tool_error", err)
	}
	defer release()
	var res *RunResult
	resumed := false
	switch {
	case fresh:
		res, err = v.Run(ctx, id, prompt)
	case sess.Pending != nil:
		r := d.resolve
		if r == nil {
			if d.repair {
				r = &resolution{note: "the calling agent stopped before this approval reached a person"}
			} else {
				// Asked again without a decision (a hook ran the call
				// twice): the child still waits.
				d.pending = sess.Pending
				return Result{}, d.asking(a, sess.Pending)
			}
		}
		res, err = v.Resolve(ctx, id, r.approve, r.note)
	case sess.Meta.Status == StatusRunning:
		// The kernel stopped while the child ran: charge what it spent
		// then (its caller's totals never counted it), and go on.
		resumed = true
		led.charge(sess.Meta.Usage, sess.Meta.CostUSD)
		res, err = v.Continue(ctx, id)
		if errors.Is(err, ErrNothingToContinue) {
			res, err = finished(sess), nil
		}
	default:
		// It ended before the kernel stopped: its answer, run once.
		res = finished(sess)
		resumed = true
	}
	if res == nil {
		return fail("tool_error", fmt.Errorf("agent %s: %w", a.Name, err))
	}
	d.child = &ChildRun{SessionID: id, Agent: a.Name, StopReason: res.StopReason, Usage: res.Usage, CostUSD: res.CostUSD, Resumed: resumed}
	return d.outcome(a, res, err)
}

// outcome is the call's result for the child's end.
func (d *delegation) outcome(a *Agent, res *RunResult, err error) (Result, error) {
	name := AgentToolPrefix + a.Name
	switch res.StopReason {
	case StopCompleted:
		return Result{Content: res.Output}, nil
	case StopAwaitingApproval:
		d.pending = res.Pending
		return Result{}, d.asking(a, res.Pending)
	case StopCancelled:
		return Result{Content: Cancelled, IsError: true}, &ToolError{Tool: name, Code: "cancelled", Err: ErrCancelled}
	}
	head := fmt.Sprintf("[agent %s stopped: %s after %d turns]", a.Name, res.StopReason, res.Turns)
	if res.StopReason == StopMaxTurns || strings.HasPrefix(string(res.StopReason), "budget:") || res.StopReason == StopInterrupted {
		if res.Output != "" {
			return Result{Content: head + "\n" + res.Output}, nil
		}
		return Result{Content: head + " without an answer", IsError: true}, nil
	}
	why := string(res.StopReason)
	if err != nil {
		why = err.Error()
	}
	return Result{Content: head + ": " + why, IsError: true}, nil
}

// asking is the error that makes the caller's call wait for the approval
// its child waits for.
func (d *delegation) asking(a *Agent, child *Approval) error {
	msg := fmt.Sprintf("agent %s asks to run %s", a.Name, child.Asking().Call.Name)
	if m := child.Asking().Message; m != "" {
		msg += ": " + m
	}
	dec := Decision{ID: child.DecisionID, Effect: EffectAsk, Message: msg}
	if child.RuleID != "" {
		dec.Rules = []string{child.RuleID}
	}
	return &ApprovalRequiredError{Decision: dec, Child: child}
}

// finished is the result of a child that ended before: its last answer.
func finished(sess *Session) *RunResult {
	res := &RunResult{SessionID: sess.Meta.ID, StopReason: StopCompleted}
	for i := len(sess.Messages) - 1; i >= 0; i-- {
		m := &sess.Messages[i]
		if m.Role == RoleAssistant && m.Failed == "" {
			res.Output = m.Content
			break
		}
	}
	if sess.Meta.Status == StatusFailed {
		res.StopReason = StopError
	}
	return res
}

// childView is ck running a child session of p's call: events nested in
// p's stream, p's principal, the child's ledger node, and the child
// session's own lease when p holds one. release ends what it took.
func (ck *Kernel) childView(ctx context.Context, p *run, d *delegation, a *Agent, led *ledger, id string, depth int) (*Kernel, func(), error) {
	v := ck.view(RunOptions{Principal: p.k.principal})
	v.cfg.OnEvent = nil
	if pk := p.k; pk.cfg.OnEvent != nil {
		call, name := d.callID, a.Name
		v.cfg.OnEvent = func(e Event) {
			pk.emit(AgentEvent{CallID: call, Agent: name, SessionID: id, Depth: depth, Event: e})
		}
	}
	v.scope = &childScope{led: led}
	release := func() {}
	if h := p.k.lease; h != nil {
		if l, ok := ck.cfg.Store.(Leaser); ok {
			ch, err := HoldLease(ctx, l, id, h.Lease().Holder, h.ttl)
			if err != nil {
				return nil, nil, fmt.Errorf("agent %s: lease its session %s: %w", a.Name, id, err)
			}
			v.lease = ch
			release = func() { ch.Release(context.WithoutCancel(ctx)) }
		}
	}
	return v, release, nil
}

// firstCall predicts the cost and tokens of the first model call of a
// child run of k with prompt: its system prompt, the prompt and every tool
// it may be offered.
func (k *Kernel) firstCall(prompt string) (float64, int64) {
	msgs := []Message{{Role: RoleUser, Content: prompt}}
	if k.cfg.SystemPrompt != "" {
		msgs = append([]Message{{Role: RoleSystem, Content: k.cfg.SystemPrompt}}, msgs...)
	}
	n := int64(countRequest(k.cfg.Tokenizer, msgs, k.cfg.Tools.view()))
	return k.price(k.cfg.Model).Cost(Usage{InputTokens: n}), n
}

// checkChild refuses to run a child session except through its parent.
func (r *run) checkChild() error {
	if p := r.meta.Parent; p != nil && r.k.scope == nil {
		return fmt.Errorf("session %s: %w of session %s (agent %s, call %s): it runs only through its parent", r.meta.ID, ErrChildSession, p.SessionID, r.meta.Agent, p.CallID)
	}
	return nil
}

// agentCall returns the agent tool of call c, when c calls one.
func (k *Kernel) agentCall(name string) (*agentTool, bool) {
	t, ok := k.cfg.Tools.Lookup(name)
	if !ok {
		return nil, false
	}
	at, ok := t.(*agentTool)
	return at, ok
}

// answerChild is repair's answer to an agent call left without a result:
// the child session is the record of what ran. A child that ended gives
// its answer; one that was running is resumed (its own repair answers its
// calls under the same rules) and gives its answer; one waiting for an
// approval nobody saw is rejected; one never started did not run.
func (r *run) answerChild(ctx context.Context, t *agentTool, c ToolCall, seq uint64) Message {
	m := Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name}
	var in agentArgs
	if err := json.Unmarshal([]byte(c.Arguments), &in); err != nil {
		m.Content, m.IsError = InterruptedNotRun+"its arguments are not valid", true
		return m
	}
	d := &delegation{parent: r, callID: c.ID, seq: seq, repair: true}
	res, err := d.run(ctx, t, in.prompt())
	m.Child = d.child
	switch {
	case err != nil && approvalOf(err) != nil:
		m.Content, m.IsError = Interrupted, true
	case err != nil:
		m.Content, m.IsError = "error: "+err.Error(), true
	default:
		m.Content, m.IsError = res.Content, res.IsError
	}
	return m
}

// rejectChild rejects the approval the child of pending call p waits for,
// with why: the person rejected the caller's approval, or it expired.
func (r *run) rejectChild(ctx context.Context, p *Approval, why string) {
	t, ok := r.k.agentCall(p.Call.Name)
	if !ok {
		return
	}
	var in agentArgs
	if json.Unmarshal(p.Args, &in) != nil {
		return
	}
	d := &delegation{parent: r, callID: p.Call.ID, seq: r.callSeq(), resolve: &resolution{note: why}}
	_, _ = d.run(ctx, t, in.prompt()) // best effort: the caller's rejection stands either way
}

// abandonChild rejects the approval the child of an agent call waits for
// when its caller will not wait for it (the call was deferred or
// rejected), so that no child session is left waiting for nobody.
func (r *run) abandonChild(ctx context.Context, d *delegation, why string) {
	if d == nil || d.pending == nil || d.child == nil {
		return
	}
	t, ok := r.k.agentCall(AgentToolPrefix + d.child.Agent)
	if !ok {
		return
	}
	again := &delegation{parent: r, callID: d.callID, seq: d.seq, resolve: &resolution{note: why}}
	sess, err := t.a.Kernel.cfg.Store.Load(ctx, d.child.SessionID)
	if err != nil || sess.Pending == nil {
		return
	}
	_, _ = again.run(ctx, t, "") // the child exists: the prompt is not used
}
