package kernel

import (
	"context"
	"time"
)

// RunInfo is what an observer learns when a run starts.
type RunInfo struct {
	SessionID string
	// Model is the configured model (fallbacks may answer instead).
	Model string
	// Principal is RunOptions.Principal: who started the run or decided
	// the approval it resolves.
	Principal string
	// NewSession is true when the run creates the session; Resumed when
	// it continues one (Resolve, Continue).
	NewSession, Resumed bool
	// Direct is true for one call of a DirectSession (`kernel mcp serve`:
	// no model, one tool call) and for a forced compaction (Compact: the
	// summariser's model call, then ContextCompacted): no run and no run
	// events around it.
	Direct bool
	// Agent is the agent the session runs (SessionMeta.Agent; empty for
	// the top-level agent) and Parent, for a child run, the call of the
	// parent session that started it.
	Agent  string
	Parent *ParentLink
	// Pending is the approval this run resolves (Resolve), nil otherwise.
	// It must not be modified.
	Pending *Approval
}

// RunObserver watches one run from outside the kernel: telemetry. The
// kernel calls its methods from the run's goroutines; Event calls are
// serialised with the run's other events. None may block for long.
type RunObserver interface {
	// Event receives every event of the run, after the run's OnEvent.
	Event(e Event)
	// Committed reports one step written to the store: how long
	// Store.Commit took, and its error.
	Committed(d time.Duration, err error)
	// End is called once, when the run returns: res and err are what Run
	// (Resolve, Continue) returns; both nil for a direct call.
	End(res *RunResult, err error)
}

// StepObserver is an optional capability of a RunObserver: StepCommitted
// gets each step the store wrote, after Commit returned nil, its messages
// as stored (scrubbed, with their Seq and Time) and its metadata. Memory's
// indexer is one. It is called on the run's goroutine, on the commit path:
// it must only hand the step off (it must not block, write to the store or
// modify the step; it may keep it, as a store may: the history is
// append-only).
type StepObserver interface {
	StepCommitted(sessionID string, step *Step)
}

// ObserveFunc starts observing a run. The context it returns is the run's
// context from then on: every model call, tool call and store write of the
// run derives from it, so an observer can carry its state there (a trace
// span). It must return ctx's cancellation unchanged.
// Why: RATIONALE.md, "Telemetry observes the kernel through one callback".
type ObserveFunc func(ctx context.Context, info RunInfo) (context.Context, RunObserver)

// observe starts the observer of a run, when one is configured: r's
// events go to it from now on, and the run continues with the context it
// returns. end must be deferred by the caller with the run's result.
func (r *run) observe(ctx context.Context, info RunInfo) context.Context {
	k := r.k
	if k.cfg.Observe == nil {
		return ctx
	}
	info.SessionID, info.Model, info.Principal = r.meta.ID, k.cfg.Model, k.principal
	info.Agent, info.Parent = r.meta.Agent, r.meta.Parent
	octx, obs := k.cfg.Observe(ctx, info)
	if obs == nil {
		return ctx
	}
	// The run's events go through a view of the kernel whose sink also
	// feeds the observer: calls and hooks of this run emit through r.k.
	d := k.view(RunOptions{Principal: k.principal, Interrupt: k.interrupt, Lease: k.lease, CommitStep: k.commitStep, CommitEnd: k.commitEnd})
	next := k.cfg.OnEvent
	d.cfg.OnEvent = func(e Event) {
		if next != nil {
			next(e)
		}
		obs.Event(e)
	}
	d.obs = obs
	r.k = d
	return octx
}

// end tells the observer the run returned.
func (r *run) end(res *RunResult, err error) {
	if obs := r.k.obs; obs != nil {
		obs.End(res, err)
	}
}
