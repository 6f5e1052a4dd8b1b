package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Side effects are fenced, not only writes. Before a call that is not
// read-only (side-effecting or privileged) runs, the kernel stores its
// intent with the session (SessionMeta.Round), as a step of its own that
// carries the run's lease token (Step.Fence): a Leaser store refuses it
// once the lease is lost, and then the call does not run. So a process
// that paused past its lease and comes back cannot start a side effect
// after another holder took the session over; and the holder that repairs
// the session knows which calls may have run (an intent and no result)
// and which did not (no intent). Read-only calls record nothing.
//
// The order, for one side-effecting call:
//
//  1. the assistant message with the calls is stored with Round{Seq}:
//     from here the round's intents are recorded;
//  2. policy, hooks and the tool-concurrency limit pass the call;
//  3. the intent is stored (fenced); on failure the call does not run and
//     the run ends (ErrLeaseLost: it writes nothing more);
//  4. the tool runs;
//  5. the round's results are stored with Round cleared.
//
// Agent calls of a round run together (dispatch.go): their intents are
// stored by the loop, one after another, before any of them starts, so
// steps 2 and 3 swap for them (groupIntents says why, and what it costs).
//
// What remains unfenceable: a process that pauses between 3 and 4 runs
// the effect late, after another holder answered the call. That holder's
// answer says the call may have run, which is then true. Why, and how
// this relates to fencing tokens elsewhere: RATIONALE.md, "Side effects
// are fenced by an intent record".

// Round is what the session records of its open round of tool calls: the
// calls of assistant message Seq that have no result yet.
type Round struct {
	// Seq is the assistant message whose calls these are.
	Seq uint64 `json:"seq"`
	// Started are the calls whose intent was stored: each may have run.
	Started []Intent `json:"started,omitempty"`
}

// Intent is a call the kernel was about to run when it stored this.
type Intent struct {
	CallID string    `json:"call_id"`
	Tool   string    `json:"tool"`
	Time   time.Time `json:"time"`
	// Approval is the human decision that let the call run, when it was
	// approved; repair keeps it with the call's interrupted result.
	Approval *ApprovalRecord `json:"approval,omitempty"`
}

// started returns the intent of call id, if the round has one.
func (rd *Round) started(id string) *Intent {
	if rd == nil {
		return nil
	}
	for i := range rd.Started {
		if rd.Started[i].CallID == id {
			return &rd.Started[i]
		}
	}
	return nil
}

// errNoIntent marks a call that did not run because its intent could not
// be stored; the run ends with the cause.
var errNoIntent = errors.New("the call's intent could not be recorded, so it did not run")

// openRound marks the assistant message about to be stored as the round
// whose intents are recorded: the next seq, after the before messages
// stored ahead of it in the same step (context a before_model hook added).
func (r *run) openRound(calls []ToolCall, before int) {
	r.meta.Round = nil
	if len(calls) > 0 {
		r.meta.Round = &Round{Seq: r.meta.LastSeq + 1 + uint64(before)}
	}
}

// recordIntent stores that call tc of the open round is about to run,
// fenced by the run's lease, with the metadata the step carries (and the
// pending approval cleared when clearPending: an approved call consumes
// its approval with its intent). The call must not run unless it
// returns nil.
func (r *run) recordIntent(ctx context.Context, tc ToolCall, approval *ApprovalRecord, clearPending bool) error {
	prev := r.meta.Round
	rd := &Round{Seq: r.lastAssistantSeq()}
	if prev != nil && prev.Seq == rd.Seq {
		if prev.started(tc.ID) != nil && !clearPending {
			return nil // a hook runs the call again: its intent is stored
		}
		rd.Started = slices.Clone(prev.Started)
	}
	rd.Started = append(rd.Started, Intent{CallID: tc.ID, Tool: tc.Name, Time: r.k.cfg.Now().UTC(), Approval: approval})
	r.meta.Round = rd
	if err := r.commit(ctx, Step{ClearPending: clearPending}); err != nil {
		r.meta.Round = prev
		return fmt.Errorf("%w: %w", errNoIntent, err)
	}
	return nil
}

// lastAssistantSeq is the seq of the last assistant message of the
// history, or 0.
func (r *run) lastAssistantSeq() uint64 {
	for i := len(r.msgs) - 1; i >= r.sysN; i-- {
		if r.msgs[i].Role == RoleAssistant {
			return r.msgs[i].Seq
		}
	}
	return 0
}

// intentFor returns the function core calls, right before the tool runs,
// to store the intent of call tc (nothing when it is stored already, as
// Resolve stores it with the approval), or nil for a read-only tool.
func (r *run) intentFor(tc ToolCall) func(context.Context) error {
	if r.k.readOnly(tc.Name) {
		return nil
	}
	return func(ctx context.Context) error { return r.recordIntent(ctx, tc, nil, false) }
}

// interruptedAnswer is what repair stores for call c of the last assistant
// message (at since), which has no result: whether it may have run is
// decided by the round's intents when the kernel that ran the round
// recorded them (rd is the session's Round for that message, else nil),
// and by the tool's SideEffectChecker otherwise.
func (r *run) interruptedAnswer(ctx context.Context, c ToolCall, since time.Time, rd *Round) Message {
	m := Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name, IsError: true}
	switch in := rd.started(c.ID); {
	case in != nil:
		// It may have run, and may yet (a paused holder runs it late): the
		// tool may tell that it completed, never that it did not run.
		m.Content = r.k.interruptedResult(ctx, c, since, true)
		m.Approval = in.Approval
	case rd != nil && !r.k.readOnly(c.Name):
		m.Content = InterruptedNotRun + "no intent to run it was recorded, and none can be now"
	default:
		m.Content = r.k.interruptedResult(ctx, c, since, false)
	}
	return m
}
