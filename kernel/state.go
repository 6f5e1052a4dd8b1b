package kernel

import "time"

// DefaultMaxTurns is the hard cap on the turns of one run when
// Config.MaxTurns is 0 (the CLI's limits.max_turns).
const DefaultMaxTurns = 8

// State is what policy sees of a run. The loop owns it and updates it
// between steps; it is read-only to everyone else.
// The vocabulary (run, turn, round) is kernel/doc.go's; why one state:
// RATIONALE.md, "One vocabulary and one run state".
type State struct {
	SessionID string
	Model     string
	Labels    map[string]string
	// Prompt is the latest user text.
	Prompt string
	// Run is the number of the current run (user prompt) in the session,
	// from 1.
	Run int
	// Turn is the number of the current turn (model generation) in this
	// run, from 1; it continues across an approval that resumes the run.
	// MaxTurns is the run's hard cap.
	Turn     int
	MaxTurns int
	// SessionTotals are the session's turns (the current one included),
	// tokens and cost; RunTotals this run's: RunTotals.Turns is Turn, and
	// its tokens and cost count from when the run started or an approval
	// resumed it (the store keeps no usage per message).
	SessionTotals Totals
	RunTotals     Totals
	// SessionCreated and RunStarted, with Now, give elapsed times.
	SessionCreated time.Time
	RunStarted     time.Time
	Now            time.Time
	// ToolCounts counts the session's tool calls by tool name.
	ToolCounts map[string]int
	// RunCalls lists this run's tool calls with their outcomes, in order.
	RunCalls []CallOutcome
	// Context is the next request's share of the context window (zero
	// without Config.ContextWindow).
	Context ContextUse
	// Corrections counts the text-protocol corrections sent in this run
	// (see ToolProtocol); the run stops at Config.MaxCorrections.
	Corrections int
	// Agent is the agent the session runs, its depth and its chain of
	// callers (agent.go); the same for every run of the session.
	Agent AgentState
	// Continuations counts the run_end continuations of this run (see
	// RunEndReply); at most Config.MaxContinuations.
	Continuations int
	// Hooks are the verdicts of the lifecycle hook points: run_start's
	// and run_end's in this run, the others' in this turn.
	Hooks HookVerdicts
}

// Totals counts what a session, or one run of it, has used: its turns
// (model generations, the one in flight included), tokens and cost. The
// loop keeps one Totals for the session and one for the run, inside State,
// and derives the session's metadata and the run's result from them.
type Totals struct {
	Turns   int     `json:"turns"`
	Usage   Usage   `json:"usage"`
	CostUSD float64 `json:"cost_usd"`
}

// add accounts usage and cost (a generation's, or a summariser call's).
func (t *Totals) add(u Usage, cost float64) {
	t.Usage = t.Usage.Add(u)
	t.CostUSD += cost
}

// The transitions below are the only code that changes the counts of a
// State. The live loop calls them as it goes and WalkState calls them for
// every stored message, so a state rebuilt from a session is the state the
// loop had at that point.

// startRun begins run number n for prompt.
func (st *State) startRun(n int, prompt string, now time.Time) {
	st.Run, st.Prompt = n, prompt
	st.Turn = 0
	st.RunTotals = Totals{}
	st.RunCalls = st.RunCalls[:0]
	st.Corrections = 0
	st.Continuations = 0
	st.Hooks = HookVerdicts{}
	st.RunStarted, st.Now = now, now
}

// continueRun counts a continuation a run_end hook asked for.
func (st *State) continueRun() { st.Continuations++ }

// noteHooks records what lifecycle hooks did, as m's notes say.
func (st *State) noteHooks(m *Message) { st.Hooks.applyNotes(m) }

// correct counts a correction of the text tool protocol.
func (st *State) correct() { st.Corrections++ }

// startTurn begins the next generation of the run.
func (st *State) startTurn(now time.Time) {
	st.Turn++
	st.RunTotals.Turns = st.Turn
	st.SessionTotals.Turns++
	st.Now = now
	st.Hooks.BeforeCompact, st.Hooks.BeforeModel, st.Hooks.AfterModel = PointVerdict{}, PointVerdict{}, PointVerdict{}
}

// account adds a model call's usage and cost to the session and the run.
func (st *State) account(u Usage, cost float64) {
	st.SessionTotals.add(u, cost)
	st.RunTotals.add(u, cost)
}

// finishCall records a finished tool call of the run; counted is false for
// a call that left no result in the session (the one awaiting approval),
// which the session's tool counts leave out.
func (st *State) finishCall(tool string, o Outcome, counted bool) {
	st.RunCalls = append(st.RunCalls, CallOutcome{Tool: tool, Outcome: o})
	if !counted {
		return
	}
	if st.ToolCounts == nil {
		st.ToolCounts = map[string]int{}
	}
	st.ToolCounts[tool]++
}

// apply folds one stored message into the state.
func (st *State) apply(m *Message) {
	switch m.Role {
	case RoleUser:
		if m.CorrectionKind() != "" {
			st.correct()
			return
		}
		if m.continued() {
			st.continueRun()
			st.noteHooks(m)
			return
		}
		st.startRun(st.Run+1, m.Content, m.Time)
		st.noteHooks(m)
	case RoleAssistant:
		st.startTurn(m.Time)
		st.noteHooks(m)
	case RoleTool:
		o, _ := StoredOutcome(m)
		st.finishCall(m.ToolName, o, true)
	}
}

// WalkState rebuilds, message by message, the State the loop had while it
// wrote sess: run and turn numbers, prompts, times, tool counts, and each
// run's calls with their outcomes and corrections. visit, when not nil, is called after
// each message i is applied (st is reused: copy what must outlive the
// call); an error from visit stops the walk. The returned State is the one
// after the last message, with the session's totals, run count and labels
// taken from sess.Meta, which records them exactly (a direct session's
// calls are runs without a user message); the store keeps no
// usage per message, so token and cost fields seen by visit are 0.
//
// Kernel.open resumes a session from it, and policy replay re-decides
// every recorded call with it, so the two never disagree on what a run,
// a turn or a count is. Every stored user message starts a run (a message
// steered into a running run is counted as one too), except a correction
// the kernel wrote, which counts in State.Corrections.
func WalkState(sess *Session, maxTurns int, visit func(i int, st *State) error) (State, error) {
	meta := &sess.Meta
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	st := State{
		SessionID: meta.ID, Model: meta.Model, Labels: meta.Labels, MaxTurns: maxTurns,
		SessionCreated: meta.Created, ToolCounts: map[string]int{}, Agent: metaAgent(meta),
	}
	// visit sees a copy, so that st stays on the stack of the common
	// caller, Kernel.open, which passes no visit.
	var cur *State
	if visit != nil {
		cur = new(State)
	}
	for i := range sess.Messages {
		st.apply(&sess.Messages[i])
		if visit != nil {
			*cur = st
			if err := visit(i, cur); err != nil {
				return st, err
			}
		}
	}
	st.Run = meta.Runs
	st.SessionTotals = Totals{Turns: meta.Turns, Usage: meta.Usage, CostUSD: meta.CostUSD}
	return st, nil
}

// syncMeta writes the session's totals into meta, the form the store keeps.
func (st *State) syncMeta(meta *SessionMeta) {
	meta.Runs = st.Run
	meta.Turns = st.SessionTotals.Turns
	meta.Usage = st.SessionTotals.Usage
	meta.CostUSD = st.SessionTotals.CostUSD
}
