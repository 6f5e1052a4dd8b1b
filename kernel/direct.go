package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
)

// labelDirect is the session label that marks a direct session: one whose
// tool calls come from outside the model loop (an MCP client of `kernel mcp
// serve`). Its value names the client. Approving a direct session's pending
// call runs the call and stops: there is no model to continue with.
const labelDirect = "direct"

// DirectSession runs tool calls that do not come from a model through the
// same pipeline as the loop's calls: parse, surface, validate, before hooks,
// policy, execute with the tool's deadline, after hooks (the scrubber),
// persist, events. Each call is stored in the session as an assistant
// message carrying the call, followed by its result, so `kernel sessions
// show` and replay see it like any other.
//
// A DirectSession is safe for concurrent use; its calls run one at a time
// (a session's history is a sequence).
type DirectSession struct {
	mu sync.Mutex
	r  *run
}

// Approver is asked when policy wants approval for a direct call. approved
// runs the call (policy is not asked again; hooks run again); !approved
// records it as rejected. An error means nobody could be asked: the call's
// approval is left pending in the session, for `kernel approve`.
type Approver func(ctx context.Context, tool string, args json.RawMessage, d Decision) (approved bool, err error)

// DirectResult is what one direct call produced.
type DirectResult struct {
	// Result is what the caller reads; IsError is set for every failure,
	// denial and pending approval.
	Result  Result
	Outcome Outcome
	// Decision is the policy decision, when a policy ruled on the call.
	Decision *Decision
	// Pending is the approval left in the session when policy asked and no
	// Approver could answer.
	Pending *Approval
}

// OpenDirect starts a new direct session titled title, with labels (plus
// labelDirect=client) stored in its metadata, and persists it.
func (k *Kernel) OpenDirect(ctx context.Context, client, title string, labels map[string]string) (*DirectSession, error) {
	r, err := k.open(ctx, "")
	if err != nil {
		return nil, err
	}
	defer r.dl.stop()
	r.reuses = true // Call cuts the history back to r.sysN
	r.meta.Title = truncateTitle(title)
	r.meta.Labels = maps.Clone(labels)
	if r.meta.Labels == nil {
		r.meta.Labels = map[string]string{}
	}
	r.meta.Labels[labelDirect] = client
	r.st.Labels = r.meta.Labels
	if err := r.commit(ctx, Step{}); err != nil {
		return nil, err
	}
	return &DirectSession{r: r}, nil
}

// ID is the session's id.
func (d *DirectSession) ID() string { return d.r.meta.ID }

// Surface returns the tools policy offers a direct caller now (every tool
// without a policy). A call of a tool outside it is denied.
func (d *DirectSession) Surface(ctx context.Context) []ToolSpec {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.r.st.Now = d.r.k.cfg.Now()
	return d.r.surface(ctx)
}

// Call runs one call of tool with args (a JSON object) through the
// pipeline and stores it. The error is non-nil only when the session could
// not be written; every tool failure, denial or block is in the result.
func (d *DirectSession) Call(ctx context.Context, tool string, args json.RawMessage, approve Approver) (_ DirectResult, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.r
	if base := r.k; base.cfg.Observe != nil {
		ctx = r.observe(ctx, RunInfo{Direct: true})
		defer func() { r.end(nil, err); r.k = base }()
	}
	k := r.k
	now := k.cfg.Now()
	r.st.startRun(r.st.Run+1, "", now)
	r.st.startTurn(now)
	r.offered = r.surface(ctx)
	tc := ToolCall{ID: "direct_" + NewID(), Name: tool, Arguments: string(args)}
	// The call is durable before it runs: a crash leaves it "interrupted"
	// (and its intent, stored right before it runs, says whether it may
	// have run).
	r.openRound([]ToolCall{tc}, 0)
	if err := r.commit(ctx, Step{Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{tc}}}}); err != nil {
		return DirectResult{}, err
	}
	r.announce([]ToolCall{tc})
	out := r.execute(ctx, tc, args, false)
	if out.approval != nil {
		d, asked := *out.approval, approve != nil
		ok, aerr := false, error(nil)
		if asked {
			ok, aerr = approve(ctx, tool, out.args, d)
		}
		switch {
		case asked && aerr == nil && ok:
			r.resolving = &resolution{approve: true}
			out = r.execute(ctx, tc, out.args, true)
			r.resolving = nil
			out.rec.Decision = &d
		case asked && aerr == nil:
			r.abandonChild(ctx, out.deleg, "the approver rejected it")
			out = r.synthetic(tc, OutcomeRejected, "not run: the approver rejected it")
			out.rec.Decision = &d
		case r.pending != nil:
			r.abandonChild(ctx, out.deleg, "its caller could not wait for it: another call of the session already waits for an approval")
			out = r.deferred(tc, out, "it needs approval, and another call of this session is already waiting for one")
		default:
			a := r.newApproval(tc, out.args, d)
			if out.deleg != nil {
				a.Child = out.deleg.pending
			}
			r.meta.Status = StatusAwaitingApproval
			if err := r.commit(ctx, Step{Pending: a}); err != nil {
				return DirectResult{}, err
			}
			r.pending = a
			k.emitIf(func() Event { return ApprovalRequired{Approval: *a} })
			msg := fmt.Sprintf("not run: policy requires approval (%s). Approval %s is pending in session %s; a person can approve it with `kernel approve %s`, which runs the call and stores its result in the session.",
				d.Message, a.ID, r.meta.ID, r.meta.ID)
			return DirectResult{Result: Result{Content: msg, IsError: true}, Outcome: OutcomeNeedsReview, Decision: &d, Pending: a}, nil
		}
	}
	r.st.finishCall(tool, out.rec.Outcome, true)
	r.meta.Round = nil
	if err := r.commit(ctx, Step{Messages: []Message{out.msg}}); err != nil {
		return DirectResult{}, err
	}
	r.msgs = r.msgs[:r.sysN] // a direct session never sends its history anywhere
	return DirectResult{Result: Result{Content: out.msg.Content, IsError: out.msg.IsError}, Outcome: out.rec.Outcome, Decision: out.rec.Decision}, nil
}

// newApproval is the pending approval of call tc with args, asked for by d.
func (r *run) newApproval(tc ToolCall, args json.RawMessage, d Decision) *Approval {
	now := r.k.cfg.Now()
	a := &Approval{
		ID: NewID(), SessionID: r.meta.ID, Call: tc, Args: args,
		Message: d.Message, DecisionID: d.ID, Created: now, Expires: now.Add(r.k.cfg.ApprovalTTL), Agent: r.meta.Agent,
	}
	if len(d.Rules) > 0 {
		a.RuleID = d.Rules[0]
	}
	return a
}
