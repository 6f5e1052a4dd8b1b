package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/faults"
)

// run is the working state of one run; it is owned by the goroutine that
// called Run or Resolve.
type run struct {
	k       *Kernel
	meta    SessionMeta
	pending *Approval
	isNew   bool
	// corrected: the last generation broke the text tool protocol and was
	// corrected; another violation now stops the run.
	corrected bool
	// wasRunning: the stored status was running when the session was
	// opened (a run was interrupted or the process stopped); see Continue.
	wasRunning bool
	// sized: open made the history's first room for a new session, which
	// settle reports to the kernel's roomHint.
	sized bool
	// msgs is the history as sent to the provider: the system message (when
	// configured, never stored) followed by the stored messages. The loop
	// only appends to it, and never writes a committed message's slot
	// again (a store may keep the array: Step.History): a failed commit
	// clips it (rewind), a run that reuses its array says so (reuses).
	msgs []Message
	sysN int
	// reuses: the run writes its history's array again after a commit (a
	// direct session keeps only its system message between calls), so its
	// steps offer the store no History.
	reuses  bool
	cx      *ctxState // token accounting, with Config.ContextWindow
	st      State
	res     RunResult
	started time.Time
	warned  map[string]bool
	deltaFn func(Delta)
	lastGen generation
	offered []ToolSpec
	// persistCtx is the run's context without its cancellation: a
	// cancelled run must still record how it ended.
	persistCtx context.Context
	// retries counts the model-call retries of this run (RetryPolicy.Budget).
	retries int
	// streamed counts the text bytes onDelta passed on in the current
	// model call (ProviderRetry.Superseded).
	streamed int
	// clean is how many leading messages of msgs are known to need no
	// filtering by withoutFailed, and cleanBase the array they were in.
	clean     int
	cleanBase *Message
	// dl bounds the run's model and tool calls with one timer.
	dl deadlines
	// names are the names of the tools namesOf[:len(names)] (toolNames).
	names   []string
	namesOf *ToolSpec
	// outs is dispatch's memory for a round's results (callOuts).
	outs []callOut
	// led is the run's budget ledger (ledger.go): set when the run has a
	// cap, runs as a child, or delegates; nil otherwise.
	led *ledger
	// resolving is the decision Resolve runs the pending call with, for
	// an agent call whose child waits for it.
	resolving *resolution
	// What the lifecycle hooks did in this turn (points_run.go): notes
	// and edits for the message that closes it, context messages stored
	// before the answer, calls refused; ended: run_end's hooks ran.
	notes   []HookNote
	edits   []Edit
	inject  []Message
	refused map[string]Refusal
	ended   bool
	// hold: the step being committed is the run's last answer, to be
	// stored with the events that end the run (RunOptions.CommitEnd);
	// held is that step until then (commit.go).
	hold bool
	held *heldStep
}

// Run sends prompt to the model in the session sessionID (a new session when
// sessionID is empty) and loops until a final answer, a hard cap, a budget,
// an approval request, cancellation or an error stops it.
//
// Run returns a non-nil result whenever the session could be opened; err is
// non-nil when the stop reason is error or cancelled. A session with a
// pending approval cannot run until it is resolved (ErrApprovalPending),
// unless the approval has expired, in which case it is rejected first.
func (k *Kernel) Run(ctx context.Context, sessionID, prompt string) (res *RunResult, err error) {
	return k.runPrompt(ctx, sessionID, prompt, nil)
}

// runPrompt is Run, and RunQueued when q is set.
func (k *Kernel) runPrompt(ctx context.Context, sessionID, prompt string, q *Queued) (res *RunResult, err error) {
	r, err := k.open(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	defer r.dl.stop()
	if err := r.checkChild(); err != nil {
		return nil, err
	}
	if q != nil && slices.Contains(r.meta.Delivered, q.ID) {
		return nil, r.alreadyDelivered(ctx, q)
	}
	if r.pending != nil && !r.expired() {
		return nil, fmt.Errorf("session %s: %w for %s (approve or reject it first)", r.meta.ID, ErrApprovalPending, r.pending.Call.Name)
	}
	if k.cfg.Observe != nil {
		ctx = r.observe(ctx, RunInfo{NewSession: r.isNew})
		defer func() { r.end(res, err) }()
		k = r.k
	}
	if r.pending != nil {
		if err := r.reject(ctx, "approval expired", true); err != nil {
			return r.fail(ctx, err)
		}
	}
	prompt = k.cfg.ScrubInput(prompt)
	now := k.cfg.Now()
	r.st.startRun(r.st.Run+1, prompt, now)
	m := Message{Role: RoleUser, Content: prompt, Time: now}
	var extra []Message
	var refused error
	if k.cfg.Points.at(PointRunStart, k.cfg.Points.RunStart != nil) {
		extra, refused = r.runStart(ctx, &m)
		prompt = m.Content
	}
	r.meta.Status = StatusRunning
	if r.meta.Title == "" {
		r.meta.Title = truncateTitle(prompt)
	}
	k.emitIf(func() Event {
		return RunStarted{SessionID: r.meta.ID, Model: k.cfg.Model, Prompt: prompt, MaxTurns: k.cfg.MaxTurns, NewSession: r.isNew}
	})
	if q != nil {
		r.meta.Delivered = withDelivered(r.meta.Delivered, q.ID)
	}
	if refused != nil {
		res, err := r.refuse(ctx, m, refused)
		if q != nil {
			r.delivered(ctx, q)
		}
		return res, err
	}
	if extra == nil {
		if err := r.commitMsg(ctx, m, Step{}); err != nil {
			return r.fail(ctx, err)
		}
	} else if err := r.commit(ctx, Step{Messages: append([]Message{m}, extra...)}); err != nil {
		return r.fail(ctx, err)
	}
	if q != nil {
		faults.At(faults.FollowUpStored, r.meta.ID)
		r.delivered(ctx, q)
		faults.At(faults.FollowUpDelivered, r.meta.ID)
	}
	return r.loop(ctx)
}

// Resolve approves or rejects the pending approval of a session. Approving
// runs the call through the hooks (policy is not asked again) and continues
// the loop; rejecting records the call as rejected and ends the run with an
// answer written by the kernel, without asking the model. An expired
// approval is rejected whatever approve says.
func (k *Kernel) Resolve(ctx context.Context, sessionID string, approve bool, note string) (res *RunResult, err error) {
	note = k.cfg.ScrubInput(note)
	r, err := k.open(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	defer r.dl.stop()
	if err := r.checkChild(); err != nil {
		return nil, err
	}
	if r.pending == nil {
		return nil, fmt.Errorf("session %s: %w", r.meta.ID, ErrNoApproval)
	}
	if k.cfg.Observe != nil {
		ctx = r.observe(ctx, RunInfo{Resumed: true, Pending: r.pending})
		defer func() { r.end(res, err) }()
		k = r.k
	}
	// open rebuilt the run the approval interrupted (its number, prompt,
	// turns and calls): the loop continues it, turn numbering and the
	// max_turns cap included.
	k.emitIf(func() Event {
		return RunStarted{SessionID: r.meta.ID, Model: k.cfg.Model, MaxTurns: k.cfg.MaxTurns, Resumed: true}
	})
	if !approve || r.expired() {
		reason := "rejected"
		if r.expired() {
			reason = "approval expired"
		}
		if note != "" {
			reason += ": " + note
		}
		if err := r.reject(ctx, reason, false); err != nil {
			return r.fail(ctx, err)
		}
		return r.done(ctx, StopCompleted, r.res.Output)
	}
	p := r.pending
	rec := ApprovalRecord{ID: p.ID, Approved: true, By: k.principal, Note: note}
	// The approval is consumed by the call's intent, stored (fenced) with
	// the session running before the call runs: a process stopped from
	// here on leaves a session that is resumed, its call answered as
	// "may have run", never approved and run a second time.
	r.meta.Status = StatusRunning
	if err := r.recordIntent(ctx, p.Call, &rec, true); err != nil {
		return r.fail(ctx, err)
	}
	r.resolving = &resolution{approve: true, note: note}
	out := r.execute(ctx, p.Call, p.Args, true)
	r.resolving = nil
	out.msg.Approval = &rec
	r.st.finishCall(p.Call.Name, out.rec.Outcome, true)
	k.emitIf(func() Event {
		return ApprovalResolved{ApprovalID: p.ID, CallID: p.Call.ID, Tool: p.Call.Name, Approved: true, Note: note, By: k.principal}
	})
	r.meta.Round = nil
	if err := r.commitMsg(ctx, out.msg, Step{ClearPending: true}); err != nil {
		return r.fail(ctx, err)
	}
	r.pending = nil
	r.recordApproval(p, rec)
	if ctx.Err() != nil {
		return r.done(ctx, StopCancelled, "")
	}
	if _, direct := r.meta.Labels[labelDirect]; direct {
		return r.done(ctx, StopCompleted, out.msg.Content) // no model to continue with
	}
	return r.loop(ctx)
}

func (r *run) loop(ctx context.Context) (*RunResult, error) {
	k := r.k
	for {
		if k.interrupted() {
			return r.done(ctx, StopInterrupted, "")
		}
		if err := k.leaseLost(); err != nil {
			return r.fail(ctx, err)
		}
		if _, err := r.steer(ctx); err != nil {
			return r.fail(ctx, err)
		}
		if res, err, stop := r.checkBudget(ctx, BeforeModel); stop {
			return res, err
		}
		if r.st.Turn >= k.cfg.MaxTurns {
			return r.done(ctx, StopMaxTurns, "")
		}
		r.nextTurn(r.budgetNow())
		tools := r.surface(ctx)
		resp, err := r.generate(ctx, tools, nil)
		if err != nil {
			if ge := asBlock(err); ge != nil {
				return r.blocked(ctx, ge)
			}
			return r.fail(ctx, err)
		}
		if resp.text != nil && resp.text.violation != nil {
			if res, err, stop := r.correct(ctx, resp, tools); stop {
				return res, err
			}
			continue
		}
		r.corrected = false
		final := len(resp.Message.ToolCalls) == 0
		if final {
			r.meta.Status = StatusIdle
			// The last answer waits for the events that end the run,
			// to be stored with them (RunOptions.CommitEnd).
			r.hold = k.commitEnd != nil && !k.cfg.Points.at(PointRunEnd, k.cfg.Points.RunEnd != nil)
		}
		err = r.commitAnswer(ctx, resp.Message)
		r.hold = false
		if err != nil {
			return r.fail(ctx, err)
		}
		r.completed(resp)
		if final {
			// A message queued while the model answered is the next step.
			more, err := r.steer(ctx)
			if err != nil {
				return r.fail(ctx, err)
			}
			if !more && k.cfg.Points.at(PointRunEnd, k.cfg.Points.RunEnd != nil) {
				if more, err = r.runEnd(ctx, StopCompleted, r.msgs[len(r.msgs)-1].Content, true); err != nil {
					return r.fail(ctx, err)
				}
			}
			if !more {
				return r.done(ctx, StopCompleted, r.msgs[len(r.msgs)-1].Content)
			}
			if err := r.release(); err != nil { // steer's step released it (defence)
				return r.fail(ctx, err)
			}
			r.meta.Status = StatusRunning
			continue
		}
		if err := r.dispatch(ctx, resp.Message.ToolCalls, tools); err != nil {
			return r.fail(ctx, err)
		}
		if r.pending != nil {
			return r.done(ctx, StopAwaitingApproval, "")
		}
		if ctx.Err() != nil {
			return r.done(ctx, StopCancelled, "")
		}
		if res, err, stop := r.checkBudget(ctx, AfterTools); stop {
			return res, err
		}
	}
}

// nextTurn starts the next turn at now.
func (r *run) nextTurn(now time.Time) {
	r.notes, r.edits, r.inject = nil, nil, r.inject[:0]
	clear(r.refused)
	r.st.startTurn(now)
	r.k.emitIf(func() Event { return TurnStarted{Turn: r.st.Turn, MaxTurns: r.k.cfg.MaxTurns} })
}

// surface returns the tools offered in this generation.
func (r *run) surface(ctx context.Context) []ToolSpec {
	all := r.k.cfg.Tools.view()
	if r.k.cfg.Policy == nil || len(all) == 0 {
		return all
	}
	return r.k.cfg.Policy.Surface(ctx, &r.st, all)
}

// generate calls the provider once. extra, when set, is appended to the
// request only (the wrap-up instruction).
func (r *run) generate(ctx context.Context, tools []ToolSpec, extra *Message) (Response, error) {
	k := r.k
	msgs, err := r.request(ctx, tools)
	if err != nil {
		return Response{}, err
	}
	if extra != nil {
		msgs = append(msgs[:len(msgs):len(msgs)], *extra)
	}
	var guard func(context.Context) (GuardReply, error)
	if k.cfg.Points.at(PointBeforeModel, k.cfg.Points.BeforeModel != nil) {
		if msgs, guard, err = r.beforeModel(ctx, msgs, tools); err != nil {
			return Response{}, err
		}
	}
	after := k.cfg.Points.at(PointAfterModel, k.cfg.Points.AfterModel != nil)
	hold := after && (k.cfg.Points.HoldText == nil || k.cfg.Points.HoldText())
	if k.cfg.OnEvent != nil {
		k.emit(ModelRequest{
			Turn: r.st.Turn, MaxTurns: k.cfg.MaxTurns, Messages: len(msgs), Tools: r.toolNames(tools),
			Progress: r.progress("calling model"),
		})
	}
	// One clock reading per step: the turn's start serves unless building
	// the request may have taken time (context fitting can compact).
	start := r.st.Now
	if !k.realClock || r.cx != nil {
		start = time.Now()
	}
	faults.At(faults.ModelCall, k.cfg.Model)
	req := Request{Model: k.cfg.Model, Messages: msgs, Tools: tools}
	var resp Response
	if guard == nil && !hold {
		resp, err = r.callModel(ctx, req, genCall{})
	} else {
		resp, err = r.callHeld(ctx, req, guard, hold)
	}
	if err != nil {
		return Response{}, err
	}
	end := k.cfg.Now()
	resp.Message.Role = RoleAssistant
	resp.Message.Time = end
	fixCallIDs(resp.Message.ToolCalls, r.st.Turn)
	r.accountGen(resp)
	if k.realClock {
		r.lastGen.dur = end.Sub(start)
	} else {
		r.lastGen.dur = time.Since(start)
	}
	if after {
		if err := r.afterModel(ctx, &resp); err != nil {
			return Response{}, err
		}
	}
	if hold {
		r.showAnswer(&resp.Message)
	}
	return resp, nil
}

// toolNames returns the names of tools for a model.request event. The
// slice is shared by the events of the run's turns that offer the same
// tools (the registry's view is one slice until the registry changes), so
// like every event's fields it must not be modified.
func (r *run) toolNames(tools []ToolSpec) []string {
	if len(tools) == 0 {
		return nil
	}
	if &tools[0] == r.namesOf && len(tools) == len(r.names) {
		return r.names
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	r.names, r.namesOf = names, &tools[0]
	return names
}

// accountGen adds a generation's usage and cost to the session and the run,
// and calibrates the token estimate against the usage the server reported.
func (r *run) accountGen(resp Response) {
	k := r.k
	model := resp.Model
	if _, ok := k.cfg.Prices[model]; !ok && resp.Message.Model != "" {
		model = resp.Message.Model // a fallback's price, not the primary's
	}
	cost := k.price(model).Cost(resp.Usage)
	r.st.account(resp.Usage, cost)
	if r.led != nil {
		r.led.charge(resp.Usage, cost)
	}
	if r.cx != nil && !r.cx.exact {
		k.calib.observe(k.cfg.Model, r.cx.lastRaw, resp.Usage.InputTokens)
	}
	r.lastGen = generation{usage: resp.Usage, cost: cost}
}

type generation struct {
	usage Usage
	cost  float64
	dur   time.Duration
}

func (r *run) completed(resp Response) {
	msg := r.msgs[len(r.msgs)-1]
	g := r.lastGen
	r.emitEnd(func() Event {
		return MessageCompleted{Turn: r.st.Turn, Message: msg, Usage: g.usage, CostUSD: g.cost, Duration: g.dur}
	})
}

// fixCallIDs gives every call a unique, non-empty id: the history is invalid
// for the provider otherwise.
func fixCallIDs(calls []ToolCall, turn int) {
	for i := range calls {
		dup := calls[i].ID == ""
		for j := 0; j < i && !dup; j++ {
			dup = calls[j].ID == calls[i].ID
		}
		if dup {
			calls[i].ID = fmt.Sprintf("call_k%d_%d", turn, i)
		}
	}
}

func (k *Kernel) price(model string) Price {
	if p, ok := k.cfg.Prices[model]; ok {
		return p
	}
	return k.cfg.Prices[k.cfg.Model]
}

// checkBudget asks the policy about budgets; stop is true when the run
// ended (after an optional wrap-up generation).
func (r *run) checkBudget(ctx context.Context, phase BudgetPhase) (res *RunResult, err error, stop bool) {
	if r.led != nil || r.st.Agent.Depth > 0 {
		if res, err, stop := r.checkLedger(ctx, phase); stop {
			return res, err, true
		}
	}
	p := r.k.cfg.Policy
	if p == nil {
		return nil, nil, false
	}
	r.st.Now = r.k.cfg.Now()
	v := p.Budget(ctx, &r.st, phase)
	for _, w := range v.Warnings {
		if r.warned == nil {
			r.warned = map[string]bool{}
		}
		if !r.warned[w.ID] {
			r.warned[w.ID] = true
			r.k.emitIf(func() Event { return BudgetWarning{w} })
		}
	}
	if v.Stop == nil {
		return nil, nil, false
	}
	b := *v.Stop
	r.k.emitIf(func() Event { return BudgetExceeded{b} })
	if !b.WrapUp {
		res, err := r.done(ctx, BudgetStop(b.ID), "")
		return res, err, true
	}
	msg := "Budget " + b.ID + " is exhausted"
	if b.Message != "" {
		msg += " (" + b.Message + ")"
	}
	msg += ". No tools are available any more: answer now, as well as you can, from what you already have."
	r.nextTurn(r.budgetNow())
	resp, gerr := r.generate(ctx, nil, &Message{Role: RoleUser, Content: msg})
	if gerr != nil {
		if ge := asBlock(gerr); ge != nil {
			res, err := r.blocked(ctx, ge)
			return res, err, true
		}
		res, err := r.fail(ctx, gerr)
		return res, err, true
	}
	resp.Message.ToolCalls = nil // none were offered; keep the history valid
	r.meta.Status = StatusIdle
	if err := r.commitAnswer(ctx, resp.Message); err != nil {
		res, err := r.fail(ctx, err)
		return res, err, true
	}
	r.completed(resp)
	res, err = r.done(ctx, BudgetStop(b.ID), resp.Message.Content)
	return res, err, true
}

// budgetNow is the time a turn that follows a before_model budget check
// starts at: with the real clock, the check's own reading (checkBudget
// read it into st.Now a moment ago, only the budgets' evaluation in
// between); otherwise, or without a policy, a reading of Config.Now, so a
// configured clock is read exactly as often as before.
func (r *run) budgetNow() time.Time {
	if r.k.realClock && r.k.cfg.Policy != nil {
		return r.st.Now
	}
	return r.k.cfg.Now()
}

// done ends the run with a non-error stop reason.
func (r *run) done(ctx context.Context, reason StopReason, output string) (*RunResult, error) {
	want := StatusIdle
	switch reason {
	case StopAwaitingApproval:
		want = StatusAwaitingApproval
	case StopInterrupted:
		want = StatusRunning // Continue resumes it, as after a crash
	}
	if !r.ended && r.k.cfg.Points.at(PointRunEnd, r.k.cfg.Points.RunEnd != nil) && reason != StopAwaitingApproval && reason != StopInterrupted && reason != StopCancelled {
		if _, err := r.runEnd(ctx, reason, output, false); err != nil {
			return r.fail(ctx, err)
		}
	}
	var marker []Message
	if reason == StopCancelled {
		marker = r.unanswered("cancelled before the model answered")
	}
	if r.meta.Status != want || marker != nil {
		r.meta.Status = want
		if err := r.commit(ctx, Step{Messages: marker}); err != nil {
			return r.fail(ctx, err)
		}
	}
	r.res.StopReason = reason
	r.res.Output = output
	r.settle()
	r.res.Pending = r.pending
	r.emitEnd(func() Event {
		return RunCompleted{SessionID: r.meta.ID, StopReason: reason, Output: output, Usage: r.res.Usage,
			CostUSD: r.res.CostUSD, Turns: r.res.Turns, Duration: r.res.Duration, Blocked: r.res.Blocked, Notes: r.res.Notes}
	})
	if err := r.release(); err != nil { // the last answer and the events that end the run, one write
		return r.fail(ctx, err)
	}
	if reason == StopCancelled {
		return &r.res, ctx.Err()
	}
	return &r.res, nil
}

// fail ends the run with an error (or as cancelled when ctx is done).
func (r *run) fail(ctx context.Context, err error) (*RunResult, error) {
	if r.held != nil {
		// The held answer was stored before what failed after it (best
		// effort: a store that fails now cuts it back).
		_ = r.release()
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return r.done(ctx, StopCancelled, "")
	}
	r.res.StopReason = StopError
	switch {
	case errors.Is(err, ErrEmptyResponse):
		r.res.StopReason = StopEmptyResponse
	case errors.Is(err, ErrToolProtocol):
		r.res.StopReason = StopToolProtocol
	case errors.Is(err, ErrGuardrail):
		r.res.StopReason = StopGuardrail
	}
	r.settle()
	// A run whose lease is gone writes nothing more: the session is
	// another holder's now.
	if r.meta.Status != StatusFailed && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrLeaseHeld) {
		r.meta.Status = StatusFailed
		msgs := r.unanswered(err.Error())
		// Calls left without a result (their results could not be
		// stored, or the run failed between a call's intent and its
		// result) are answered as repair would answer them on the next
		// run: a failed session never ends with an unanswered call, and
		// the history says which may have run. Why: RATIONALE.md, "A
		// failed run answers its open calls (issue 45, tenth stop)".
		if fix := r.openAnswers(ctx); len(fix) > 0 {
			msgs = append(msgs, fix...)
			if r.pending == nil {
				r.meta.Round = nil
			}
		}
		_ = r.commit(ctx, Step{Messages: msgs}) // best effort: the store may be what failed
	}
	reason := r.res.StopReason
	r.k.emitIf(func() Event { return RunFailed{SessionID: r.meta.ID, StopReason: reason, Error: err.Error()} })
	return &r.res, err
}

// settle fills the result's totals and duration from the run's state.
func (r *run) settle() {
	t := r.st.RunTotals
	r.res.Turns, r.res.Usage, r.res.CostUSD = t.Turns, t.Usage, t.CostUSD
	r.res.Duration = time.Since(r.started)
	if r.sized {
		r.k.rooms.ended(len(r.msgs))
	}
}

func (r *run) expired() bool {
	return r.pending != nil && !r.pending.Expires.IsZero() && r.k.cfg.Now().After(r.pending.Expires)
}

func truncateTitle(s string) string {
	const max = 60
	if len(s) <= max && !strings.ContainsAny(s, "\r\n") {
		return s
	}
	rs := []rune(s)
	for i, c := range rs {
		if c == '\n' || c == '\r' {
			rs = rs[:i]
			break
		}
	}
	if len(rs) > max {
		return string(rs[:max-1]) + "…"
	}
	return string(rs)
}

// progress prefixes what with "[turn/max] ".
func (r *run) progress(what string) string {
	return "[" + strconv.Itoa(r.st.Turn) + "/" + strconv.Itoa(r.st.MaxTurns) + "] " + what
}

// emitIf builds and sends an event only when someone listens, so a kernel
// without OnEvent pays nothing for events.
func (k *Kernel) emitIf(build func() Event) {
	if k.cfg.OnEvent != nil {
		k.emit(build())
	}
}

// reject records the pending call as not run. A rejection the user asked
// for ends with an answer written by the kernel (the model is not asked to
// narrate it); an expired approval found by a new prompt only records the
// result, and the new prompt follows.
func (r *run) reject(ctx context.Context, reason string, beforePrompt bool) error {
	p := r.pending
	if p.Child != nil {
		r.rejectChild(ctx, p, reason)
	}
	expired := strings.HasPrefix(reason, "approval expired")
	by := ""
	if !beforePrompt {
		by = r.k.principal // an expiry found by a new prompt is nobody's decision
	}
	rec := ApprovalRecord{ID: p.ID, Expired: expired, By: by, Note: reason}
	msgs := []Message{{Role: RoleTool, ToolCallID: p.Call.ID, ToolName: p.Call.Name, Content: "not run: " + reason, IsError: true, Approval: &rec}}
	answer := ""
	if !beforePrompt {
		answer = fmt.Sprintf("I did not run %s: %s.", p.Call.Name, reason)
		msgs = append(msgs, Message{Role: RoleAssistant, Content: answer})
	}
	r.meta.Status = StatusIdle
	if err := r.commit(ctx, Step{Messages: msgs, ClearPending: true}); err != nil {
		return err
	}
	r.pending = nil
	r.st.finishCall(p.Call.Name, OutcomeRejected, true)
	r.res.Output = answer
	if answer != "" && r.k.cfg.OnEvent != nil {
		// The kernel wrote this answer; consumers see it like a model's.
		msg := r.msgs[len(r.msgs)-1]
		r.k.emit(MessageDelta{Text: answer})
		r.k.emit(MessageCompleted{Turn: r.st.Turn, Message: msg})
	}
	outcome := OutcomeRejected
	r.recordApproval(p, rec)
	r.res.Calls = append(r.res.Calls, CallRecord{ID: p.Call.ID, Tool: p.Call.Name, Args: string(p.Args), Outcome: outcome, Error: reason})
	r.k.emitIf(func() Event {
		return ApprovalResolved{ApprovalID: p.ID, CallID: p.Call.ID, Tool: p.Call.Name, Expired: expired, Note: reason, By: by}
	})
	return nil
}
