package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/faults"
)

// callOut is what the pipeline produced for one call.
type callOut struct {
	msg      Message
	rec      CallRecord
	approval *Decision // set when policy asked for approval
	args     json.RawMessage
	// deleg is the delegation of an agent call: the child that ran it.
	deleg *delegation
	// noIntent is why the call did not run: its intent could not be
	// stored (the lease is lost, the store failed). The run ends with it.
	noIntent error
}

// dispatch runs one round of tool calls through the pipeline and commits all
// their results as one step. Contiguous read-only calls run concurrently;
// every other call runs alone, in document order. After an approval request
// the rest of the round is deferred; after cancellation it is cancelled.
func (r *run) dispatch(ctx context.Context, calls []ToolCall, offered []ToolSpec) error {
	k := r.k
	outs := r.callOuts(len(calls))
	r.offered = offered
	asked := -1
	for i := 0; i < len(calls); {
		j := i + 1
		if k.concurrent(calls[i].Name) {
			for j < len(calls) && k.concurrent(calls[j].Name) {
				j++
			}
		}
		if ctx.Err() != nil || asked >= 0 {
			for ; i < len(calls); i++ {
				outs[i] = r.skipped(calls[i], ctx.Err() != nil)
			}
			break
		}
		r.announce(calls[i:j])
		if j-i == 1 {
			if f, ok := r.refused[calls[i].ID]; ok {
				outs[i] = r.refusal(calls[i], f)
			} else {
				outs[i] = r.execute(ctx, calls[i], json.RawMessage(calls[i].Arguments), false)
				if err := outs[i].noIntent; err != nil {
					// The call did not run and nothing may run after it:
					// the session may be another holder's now.
					return err
				}
			}
		} else {
			ps := make([]prepared, j-i)
			for n := i; n < j; n++ {
				if f, ok := r.refused[calls[n].ID]; ok {
					outs[n] = r.refusal(calls[n], f)
					continue
				}
				ps[n-i] = r.prepare(calls[n], json.RawMessage(calls[n].Arguments), false)
			}
			if err := r.groupIntents(ctx, ps); err != nil {
				// No call of the group ran, and nothing may run after it.
				return err
			}
			// A run without a cap makes its ledger node when it first
			// delegates: make it before agent calls run together, so they
			// share one (each making its own lost the others' spend).
			for n := i; n < j; n++ {
				if _, ok := r.k.agentCall(calls[n].Name); ok {
					r.ledger()
					break
				}
			}
			var wg sync.WaitGroup
			for n := i; n < j; n++ {
				if _, ok := r.refused[calls[n].ID]; ok {
					continue // answered above
				}
				p := &ps[n-i]
				if p.call == nil { // failed before the chain: nothing to wait for
					outs[n] = r.finish(ctx, p)
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[n] = r.finish(ctx, p)
				}()
			}
			wg.Wait()
		}
		for n := i; n < j; n++ {
			if outs[n].approval == nil {
				continue
			}
			if asked < 0 {
				asked = n
				continue
			}
			r.abandonChild(ctx, outs[n].deleg, "its caller could not wait for it: another approval of the caller's round came first")
			outs[n] = r.deferred(calls[n], outs[n], "it needs approval, and only one approval can be pending at a time")
		}
		i = j
	}

	// The round's messages go straight onto the history, and the step is
	// its tail (commitTail): no slice of their own.
	base := len(r.msgs)
	var step Step
	for n := range outs {
		r.res.Calls = append(r.res.Calls, outs[n].rec)
		r.st.finishCall(calls[n].Name, outs[n].rec.Outcome, n != asked)
		if n == asked {
			continue
		}
		r.msgs = append(r.msgs, outs[n].msg)
	}
	r.meta.Round = nil // every call is answered (or pending, whose intent Resolve stores)
	if asked >= 0 {
		a := r.newApproval(calls[asked], outs[asked].args, *outs[asked].approval)
		if d := outs[asked].deleg; d != nil {
			a.Child = d.pending
		}
		step.Pending = a
		r.meta.Status = StatusAwaitingApproval
		r.pending = a
	}
	if err := r.commitTail(ctx, base, step); err != nil {
		return err
	}
	if r.pending != nil {
		a := *r.pending
		k.emitIf(func() Event { return ApprovalRequired{Approval: a} })
	}
	return nil
}

// groupIntents stores, on the loop's goroutine, the intents of the calls
// of a group that runs together (agent calls that may write) before any
// of them starts, and clears each call's intent function: recording an
// intent commits a step and moves the run's metadata, which the calls'
// goroutines must not do beside each other or beside the children that
// read the parent run. So in a group the intent comes before policy,
// hooks and the concurrency limit, not after: a crash can leave an intent
// for a call that was then denied or waited for approval, which repair
// does not read for an agent call (it answers through the child). On
// failure no call of the group runs (intent.go).
func (r *run) groupIntents(ctx context.Context, ps []prepared) error {
	for n := range ps {
		c := ps[n].call
		if c == nil || c.intent == nil {
			continue
		}
		if err := c.intent(ctx); err != nil {
			return err
		}
		c.intent = nil
	}
	return nil
}

// callOuts returns n zeroed callOuts in memory the run reuses from round
// to round: nothing keeps a callOut after its round is committed (records
// and messages are copied out).
func (r *run) callOuts(n int) []callOut {
	if cap(r.outs) < n {
		r.outs = make([]callOut, n)
	}
	outs := r.outs[:n]
	clear(outs)
	return outs
}

// concurrent reports whether a call of the named tool may run beside
// others: a read-only tool's, or an agent's (each child is a session with
// its own order; RATIONALE.md, "Agent calls of a round run together").
func (k *Kernel) concurrent(name string) bool {
	e, ok := k.cfg.Tools.entry(name)
	if !ok || e.spec.Tier == TierReadOnly {
		return true
	}
	_, agent := e.tool.(*agentTool)
	return agent
}

func (k *Kernel) readOnly(name string) bool {
	s, ok := k.cfg.Tools.Spec(name)
	// An unknown tool fails fast in the pipeline; it can share a batch.
	return !ok || s.Tier == TierReadOnly
}

// announce emits tool.started for a batch.
func (r *run) announce(batch []ToolCall) {
	k := r.k
	if k.cfg.OnEvent == nil {
		return
	}
	names := make([]string, len(batch))
	for i, c := range batch {
		names[i] = c.Name
	}
	progress := r.progress("running tools: " + strings.Join(names, ", "))
	for _, c := range batch {
		k.emit(ToolStarted{Turn: r.st.Turn, CallID: c.ID, Tool: c.Name, Args: c.Arguments, Progress: progress})
	}
}

// execute takes one call through the whole pipeline.
func (r *run) execute(ctx context.Context, tc ToolCall, args json.RawMessage, approved bool) callOut {
	p := r.prepare(tc, args, approved)
	return r.finish(ctx, &p)
}

// prepared is a call after the pipeline's first three steps: either a Call
// ready for the hook chain or the error that stopped it.
type prepared struct {
	tc    ToolCall
	args  json.RawMessage
	call  *Call
	err   error
	start time.Time
}

// prepare parses, checks the tool was offered, and validates: pure CPU work
// the loop does on its own goroutine, whose stack is already grown (the
// schema validator recurses; fresh goroutines would grow theirs every time).
func (r *run) prepare(tc ToolCall, args json.RawMessage, approved bool) prepared {
	k := r.k
	p := prepared{tc: tc, args: args, start: time.Now()}
	e, known := k.cfg.Tools.entry(tc.Name)
	switch {
	case !known:
		p.err = &ToolError{Tool: tc.Name, Code: "unknown_tool", Err: fmt.Errorf("%w %q; the available tools are: %s", ErrUnknownTool, tc.Name, r.offeredNames())}
	case !approved && !r.isOffered(tc.Name):
		p.err = &ToolError{Tool: tc.Name, Code: "denied", Err: fmt.Errorf("%w: %s is not available now", ErrNotOffered, tc.Name)}
	default:
		v, verr := e.validate(args)
		if verr != nil {
			p.err = &ToolError{Tool: tc.Name, Code: "invalid_args", Err: verr}
			break
		}
		p.call = &Call{id: tc.ID, spec: e.spec, tool: e.tool, args: args, st: &r.st, approved: approved, value: v, entry: e, k: k, dl: &r.dl,
			intent: r.intentFor(tc)}
		if _, ok := e.tool.(*agentTool); ok {
			p.call.deleg = r.delegation(tc, approved)
		}
		p.call.resolvePaths()
	}
	return p
}

// finish runs a prepared call through the hook chain around policy and
// execution, and turns the outcome into the tool message and audit record.
func (r *run) finish(ctx context.Context, p *prepared) (out callOut) {
	k := r.k
	tc := p.tc
	out.args = p.args
	var res Result
	err := p.err
	if p.call != nil {
		res, err = k.handle(ctx, p.call)
		out.args = p.call.args
	}
	args := tc.Arguments // the same text unless a hook or path resolution rewrote it
	if string(out.args) != args {
		args = string(out.args)
	}
	out.rec = CallRecord{ID: tc.ID, Tool: tc.Name, Args: args, Duration: time.Since(p.start)}
	if errors.Is(err, errNoIntent) {
		out.noIntent = err
	}
	if p.call != nil {
		out.rec.Decision = p.call.decision
		out.deleg = p.call.deleg
	}
	if d := approvalOf(err); d != nil {
		out.approval = d
		out.rec.Outcome = OutcomeNeedsReview
		out.rec.Error = err.Error()
		return out
	}
	switch {
	case err != nil:
		out.rec.Outcome = classify(err)
		out.rec.Error = err.Error()
		if res.Content == "" {
			res.Content = "error: " + err.Error()
		}
		res.IsError = true
	case res.IsError:
		out.rec.Outcome = OutcomeError
	default:
		out.rec.Outcome = OutcomeOK
	}
	out.msg = Message{Role: RoleTool, ToolCallID: tc.ID, ToolName: tc.Name, Content: res.Content, IsError: res.IsError}
	if out.deleg != nil {
		out.msg.Child = out.deleg.child
	}
	k.emitIf(func() Event {
		return ToolCompleted{CallID: tc.ID, Tool: tc.Name, Outcome: out.rec.Outcome, IsError: res.IsError,
			Error: out.rec.Error, Bytes: len(res.Content), Duration: out.rec.Duration}
	})
	return out
}

// approvalOf returns the decision of an ApprovalRequiredError, or nil.
func approvalOf(err error) *Decision {
	if err == nil {
		return nil // without a heap-allocated target for errors.As
	}
	var ask *ApprovalRequiredError
	if !errors.As(err, &ask) {
		return nil
	}
	d := ask.Decision
	return &d
}

func classify(err error) Outcome {
	switch {
	case errors.Is(err, ErrDenied), errors.Is(err, ErrNotOffered):
		return OutcomeDenied
	case errors.Is(err, ErrBlocked):
		return OutcomeBlocked
	case errors.Is(err, ErrCancelled), errors.Is(err, context.Canceled):
		return OutcomeCancelled
	}
	return OutcomeError
}

// skipped is the result of a call the round never reached.
func (r *run) skipped(tc ToolCall, cancelled bool) callOut {
	if cancelled {
		return r.synthetic(tc, OutcomeCancelled, Cancelled)
	}
	return r.synthetic(tc, OutcomeDeferred, "not run: an earlier call of this round is waiting for approval; call it again once that is resolved")
}

func (r *run) deferred(tc ToolCall, prev callOut, why string) callOut {
	out := r.synthetic(tc, OutcomeDeferred, "not run: "+why+"; call it again once the pending approval is resolved")
	out.rec.Decision = prev.rec.Decision
	return out
}

func (r *run) synthetic(tc ToolCall, o Outcome, content string) callOut {
	out := callOut{
		msg: Message{Role: RoleTool, ToolCallID: tc.ID, ToolName: tc.Name, Content: content, IsError: true},
		rec: CallRecord{ID: tc.ID, Tool: tc.Name, Args: tc.Arguments, Outcome: o, Error: content},
	}
	r.k.emitIf(func() Event {
		return ToolCompleted{CallID: tc.ID, Tool: tc.Name, Outcome: o, IsError: true, Error: content, Bytes: len(content)}
	})
	return out
}

func (r *run) isOffered(name string) bool {
	if r.k.cfg.Policy == nil {
		return true
	}
	for i := range r.offered {
		if r.offered[i].Name == name {
			return true
		}
	}
	return false
}

func (r *run) offeredNames() string {
	if len(r.offered) == 0 {
		return "(none)"
	}
	names := make([]string, len(r.offered))
	for i, s := range r.offered {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// callProgress is a Call as the receiver of its tool's progress reports:
// they become tool.progress events.
type callProgress Call

func (p *callProgress) ReportProgress(text string) {
	p.k.emit(ToolProgress{CallID: p.id, Tool: p.spec.Name, Text: text})
}

// core is the innermost handler: the policy decision, then execution with
// the call's deadline.
func (k *Kernel) core(ctx context.Context, c *Call) (Result, error) {
	// The call's run's kernel (a Kernel.With view) carries the run's event
	// sink; the chain is shared by every view.
	ek := c.k
	if ek == nil {
		ek = k
	}
	if k.cfg.Policy != nil && !c.approved {
		d := k.cfg.Policy.Decide(ctx, c.st, c)
		c.noteResolved(&d)
		c.decision = &d
		ek.emitIf(func() Event { return PolicyDecided{CallID: c.id, Tool: c.spec.Name, Decision: d} })
		switch d.Effect {
		case EffectAllow:
		case EffectAsk:
			return Result{}, &ApprovalRequiredError{Decision: d}
		default: // deny, and anything unknown: fail closed
			msg := "denied by policy"
			if d.Message != "" {
				msg += ": " + d.Message
			}
			return Result{Content: msg, IsError: true}, &ToolError{Tool: c.spec.Name, Code: "denied", Err: fmt.Errorf("%w: %s", ErrDenied, d.Message)}
		}
	}
	t := c.tool
	if t == nil || c.dl == nil { // both are set by prepare, and only there
		return Result{}, &ToolError{Tool: c.spec.Name, Code: "unknown_tool", Err: fmt.Errorf("%w %q: the call was not prepared by the kernel", ErrUnknownTool, c.spec.Name)}
	}
	timeout := c.spec.Timeout
	if timeout <= 0 {
		timeout = k.cfg.ToolTimeout
	}
	tctx := c.newCtx()
	tctx.deleg = c.deleg
	tctx.st = c.st
	if ek.cfg.OnEvent != nil {
		tctx.progress = (*callProgress)(c)
	}
	// The call's timeout starts with its tool's work: time in line, for
	// the kernel's tool slots and in the tool's own queues (tool.Queue),
	// is bounded by the queue limit instead.
	release := k.limit.tryAcquire()
	inLine := release == nil && k.limit != nil
	c.dl.beginQueued(tctx, ctx, time.Now(), timeout, k.cfg.ToolQueueTimeout, inLine)
	defer tctx.end()
	if inLine {
		var qerr error
		if release, qerr = k.limit.acquire(tctx); qerr != nil {
			return k.limit.queueError(c.spec.Name, k.cfg.ToolQueueTimeout, qerr)
		}
		tctx.Started()
	}
	if release != nil {
		defer release()
	}
	if c.intent != nil {
		// The last step before the effect: a lost lease stops it here.
		if err := c.intent(ctx); err != nil {
			return Result{Content: "error: " + err.Error(), IsError: true}, &ToolError{Tool: c.spec.Name, Code: "not_started", Err: err}
		}
	}
	faults.At(faults.ToolRun, c.spec.Name)
	res, err := t.Call(tctx, c.args)
	if err == nil {
		return res, nil
	}
	switch {
	case ctx.Err() != nil:
		return Result{Content: Cancelled, IsError: true}, &ToolError{Tool: c.spec.Name, Code: "cancelled", Err: ErrCancelled}
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		if own, ok := ownTimeout(res, err); ok {
			res.IsError = true
			return res, own
		}
		te := timeoutError(c.spec.Name, timeout)
		if tctx.stoppedInLine() {
			te = queueTimeoutError(c.spec.Name, k.cfg.ToolQueueTimeout)
		}
		return Result{Content: "error: " + te.Err.Error(), IsError: true}, te
	}
	var te *ToolError
	if !errors.As(err, &te) {
		te = &ToolError{Tool: c.spec.Name, Code: "tool_error", Err: err}
	}
	if res.Content == "" {
		res.Content = "error: " + err.Error()
	}
	res.IsError = true
	return res, te
}
