package kernel

import (
	"context"
	"errors"
	"fmt"
)

// ErrNothingToContinue is returned by Continue for a session whose last
// run ended (answered, failed, cancelled or waiting for an approval):
// there is no interrupted run to resume.
var ErrNothingToContinue = errors.New("no interrupted run to continue")

// RunOptions are what a front end that serves many sessions from one
// Kernel (`kernel serve`) sets per run. The zero value behaves as Config
// says.
type RunOptions struct {
	// Principal names who started the run or decided the approval (an API
	// key's name). The kernel records it with approval decisions
	// (ApprovalResolved.By, Message.Approval); it does not interpret it.
	Principal string
	// OnEvent, when set, receives the run's events instead of
	// Config.OnEvent, with the same guarantees (calls are serialised, and
	// must not block for long).
	OnEvent func(Event)
	// Interrupt, when closed, ends the run at its next step boundary (after
	// the prompt, a model answer with its tool round, or a steering
	// message is stored) with StopInterrupted. A model call or tool round
	// in flight finishes first; cancel the context to stop sooner.
	Interrupt <-chan struct{}
	// Lease, when set, is the session's lease the caller holds (on a
	// Leaser store): every step of the run carries its token
	// (Step.Fence), and once it is lost the run ends at its next step
	// boundary with an error wrapping ErrLeaseLost, writing nothing more.
	// The run neither acquires nor releases it.
	Lease *HeldLease
	// CommitStep, when set, commits the run's steps instead of
	// Config.Store.Commit, with Store.Commit's contract (it must store
	// the step, all or nothing, durably, before it returns). A front end
	// uses it to store something of its own in the step's transaction:
	// kernel serve stores the run's pending events with the step
	// (StepEventCommitter). The steps of a delegated agent's session do
	// not go through it (its events are the run's, nested).
	CommitStep func(ctx context.Context, id string, step Step) error
	// CommitEnd, when set, commits a run's last step (its final answer)
	// together with the events that end the run (MessageCompleted of
	// the answer, RunCompleted), in one write, instead of CommitStep,
	// with Store.Commit's contract for the step: all or nothing,
	// durably, before it returns. Once it returns nil, the kernel emits
	// exactly those events, in that order, to OnEvent, with no other
	// event between them: the caller, which stored them, must not store
	// them again. When it fails, nothing of it may be stored: the events
	// are not emitted, and the run fails (RunFailed). It is used only
	// with CommitStep, and never for a run with run_end hooks (they may
	// continue it). kernel serve uses it so that a client waiting for
	// run.completed waits for one sync, not two.
	// Why: RATIONALE.md, "A run's end rides its last step (issue 45)".
	CommitEnd func(ctx context.Context, id string, step Step, events []Event) error
}

// With returns a Kernel that runs with o: it shares k's configuration,
// tools, hooks, tool-concurrency cap and calibration, and differs only in
// the options. It is cheap (one allocation), meant for one run or one
// request; k is unchanged.
// Why: RATIONALE.md, "One Kernel, many front ends: per-run options".
func (k *Kernel) With(o RunOptions) *Kernel {
	d := k.view(o)
	if o.OnEvent != nil {
		d.cfg.OnEvent = o.OnEvent
	}
	return d
}

// view is a Kernel sharing k's configuration, tools, hooks, limiter and
// calibration, with its own event lock and o's principal, interrupt and
// lease (o.OnEvent is the caller's to apply).
func (k *Kernel) view(o RunOptions) *Kernel {
	return &Kernel{
		cfg:        k.cfg,
		chain:      k.chain,
		limit:      k.limit,
		retry:      k.retry,
		calib:      k.calib,
		rooms:      k.rooms,
		realClock:  k.realClock,
		principal:  o.Principal,
		interrupt:  o.Interrupt,
		lease:      o.Lease,
		commitStep: o.CommitStep,
		commitEnd:  o.CommitEnd,
		scope:      k.scope,
		// A view must keep everything New derived from the Config: the
		// models on the text tool protocol and its correction cap (without
		// them a view offered those models native tools and read the calls
		// they write as plain text), and the cap on continuations.
		protos:         k.protos,
		maxCorrections: k.maxCorrections,
		maxCont:        k.maxCont,
	}
}

// interrupted reports whether the run was asked to stop at its next step
// boundary.
func (k *Kernel) interrupted() bool {
	if k.interrupt == nil {
		return false
	}
	select {
	case <-k.interrupt:
		return true
	default:
		return false
	}
}

// Continue resumes a session whose run stopped without ending: one
// interrupted at a step boundary (StopInterrupted) or by a crash (its
// status is still running). It repairs the history the way every load
// does (calls without a result are answered as interrupted, never run
// again) and continues the loop from the last stored step, within the
// interrupted run's turns. A session whose last run ended returns
// ErrNothingToContinue; one waiting for an approval, ErrApprovalPending.
func (k *Kernel) Continue(ctx context.Context, sessionID string) (res *RunResult, err error) {
	r, err := k.open(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	defer r.dl.stop()
	if err := r.checkChild(); err != nil {
		return nil, err
	}
	if r.pending != nil {
		return nil, fmt.Errorf("session %s: %w for %s (approve or reject it first)", r.meta.ID, ErrApprovalPending, r.pending.Call.Name)
	}
	if !r.continuable() {
		return nil, fmt.Errorf("session %s (status %s): %w", r.meta.ID, r.meta.Status, ErrNothingToContinue)
	}
	if k.cfg.Observe != nil {
		ctx = r.observe(ctx, RunInfo{Resumed: true})
		defer func() { r.end(res, err) }()
		k = r.k
	}
	r.meta.Status = StatusRunning
	k.emitIf(func() Event {
		return RunStarted{SessionID: r.meta.ID, Model: k.cfg.Model, MaxTurns: k.cfg.MaxTurns, Resumed: true}
	})
	return r.loop(ctx)
}

// continuable reports whether the stored history ends where a run was
// going on: a prompt, a steering message or tool results waiting for the
// model, and the session's status says a run was in progress.
func (r *run) continuable() bool {
	if !r.wasRunning || len(r.msgs) == r.sysN {
		return false
	}
	switch last := r.msgs[len(r.msgs)-1]; last.Role {
	case RoleUser, RoleTool:
		return true
	case RoleAssistant:
		// Calls without results were answered by repair (a tool message
		// follows); an answer without calls ended the run.
		return false
	}
	return false
}

// ApprovalRecorder is an optional interface of a Policy: RecordApproval is
// told how a call the policy sent to a human was decided, so that the
// decision log has who approved what beside what asked. st is the run's
// state; it must not be kept.
type ApprovalRecorder interface {
	RecordApproval(st *State, a *Approval, rec ApprovalRecord)
}

// recordApproval tells the policy, when it wants to know.
func (r *run) recordApproval(a *Approval, rec ApprovalRecord) {
	if ar, ok := r.k.cfg.Policy.(ApprovalRecorder); ok {
		ar.RecordApproval(&r.st, a, rec)
	}
}
