package policy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// DecisionLog appends one JSON object per decision to a writer (JSON
// Lines). Argument values are passed through Redact before they are
// written; without a Redact function the arguments are left out of the log
// entirely. It is safe for concurrent use and may be shared by successive
// policies (a Watcher's reloads), so lines never interleave.
type DecisionLog struct {
	mu     sync.Mutex
	w      io.Writer
	redact func(string) string
	now    func() time.Time
	err    error
}

// NewDecisionLog returns a log writing to w. redact scrubs every string
// value of the arguments, and the decision's message (which may quote
// them); nil leaves the arguments out and writes messages as they are.
func NewDecisionLog(w io.Writer, redact func(string) string) *DecisionLog {
	return &DecisionLog{w: w, redact: redact, now: time.Now}
}

// LogRecord is one line of the decision log. The decision's eval_time is
// a duration string ("8.1µs"), as in events.
type LogRecord struct {
	Time    time.Time `json:"time"`
	Policy  string    `json:"policy"`
	Session string    `json:"session_id,omitempty"`
	// Run and Turn are the run (user prompt) and its turn (model
	// generation) that made the call.
	Run      int             `json:"run,omitempty"`
	Turn     int             `json:"turn,omitempty"`
	CallID   string          `json:"call_id"`
	Tool     string          `json:"tool"`
	Args     any             `json:"args,omitempty"`
	Decision kernel.Decision `json:"decision"`
	// Approval is set on the line that records how a call the policy sent
	// to a human (decision "ask") was decided, and by whom.
	Approval *kernel.ApprovalRecord `json:"approval,omitempty"`
	// Hook is set on the line of a hook's decision at a lifecycle point
	// (WriteHook), which has no call and no policy decision.
	Hook *HookLine `json:"hook,omitempty"`
	// Memory is set on the line of a ruling on memory's injection
	// (Policy.Memory), which has no call: CallID and Tool are empty.
	Memory *MemoryDecision `json:"memory,omitempty"`
}

// UnmarshalJSON reads a line of the decision log, also as older kernels
// wrote it: eval_time as integer nanoseconds (kernel.Decision reads both),
// and the run and turn under their old keys turn and round. A line with a
// round key is in the old form: its turn is the run and its round the
// turn.
func (r *LogRecord) UnmarshalJSON(b []byte) error {
	type plain LogRecord
	var v struct {
		plain
		Run   *int `json:"run"` // shadows plain.Run, to see whether it is there
		Round *int `json:"round"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = LogRecord(v.plain)
	switch {
	case v.Round != nil && v.Run != nil:
		return fmt.Errorf("the line has both run (the new key) and round (the old one): write run and turn only")
	case v.Round != nil:
		r.Run, r.Turn = r.Turn, *v.Round
	case v.Run != nil:
		r.Run = *v.Run
	}
	return nil
}

// ReadDecisionLog reads a decision log (JSON Lines, in the current form
// or an older one, see LogRecord.UnmarshalJSON). name is used in errors,
// which give the line number. Blank lines are skipped.
func ReadDecisionLog(name string, r io.Reader) ([]LogRecord, error) {
	var out []LogRecord
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec LogRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return out, fmt.Errorf("%s:%d: not a decision log line: %w", name, line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}

// Err returns the first write error, if any. Decisions are never held up
// by a failing log.
func (l *DecisionLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *DecisionLog) write(p *Policy, st *kernel.State, c *kernel.Call, d kernel.Decision) {
	rec := LogRecord{Time: l.now().UTC(), Policy: p.name, CallID: c.ID(), Tool: c.Tool().Name, Decision: d}
	if st != nil {
		rec.Session, rec.Run, rec.Turn = st.SessionID, st.Run, st.Turn
	}
	if l.redact != nil {
		rec.Args = redactValue(c.Value(), l.redact)
		rec.Decision.Message = l.redact(d.Message)
	}
	l.append(rec)
}

// append writes one line; the first error is kept for Err.
func (l *DecisionLog) append(rec any) {
	b, err := json.Marshal(rec)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		_, err = l.w.Write(append(b, '\n'))
	}
	if err != nil && l.err == nil {
		l.err = err
	}
}

// redactValue copies a decoded JSON value with every string passed
// through redact (keys are kept).
func redactValue(v any, redact func(string) string) any {
	switch v := v.(type) {
	case string:
		return redact(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = redactValue(x, redact)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = redactValue(x, redact)
		}
		return out
	}
	return v
}

// writeApproval records how the ask of approval a was decided: a line
// with the ask decision and the approval record (note redacted).
func (l *DecisionLog) writeApproval(p *Policy, st *kernel.State, a *kernel.Approval, rec kernel.ApprovalRecord) {
	line := LogRecord{Time: l.now().UTC(), Policy: p.name, CallID: a.Call.ID, Tool: a.Call.Name,
		Decision: kernel.Decision{ID: a.DecisionID, Effect: kernel.EffectAsk, Message: a.Message}, Approval: &rec}
	if a.RuleID != "" {
		line.Decision.Rules = []string{a.RuleID}
	}
	if st != nil {
		line.Session, line.Run, line.Turn = st.SessionID, st.Run, st.Turn
	}
	if l.redact != nil {
		line.Decision.Message = l.redact(line.Decision.Message)
		rec.Note = l.redact(rec.Note)
	}
	l.append(line)
}

// HookLine is a hook's decision at a lifecycle point in the decision log
// (LogRecord.Hook): run_start, before_compact, before_model, after_model
// or run_end.
type HookLine struct {
	Hook  string           `json:"hook"`
	Point kernel.HookPoint `json:"phase"`
	// Outcome is allowed, blocked, changed or failed; Reason a block's
	// reason or a failure's error.
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// WriteHook appends the line of a hook's decision at a lifecycle point
// (its reason redacted): a line with no call and no policy decision, only
// the session, the run, the turn and the hook.
func (l *DecisionLog) WriteHook(t time.Time, session string, run, turn int, h HookLine) {
	if l.redact != nil {
		h.Reason = l.redact(h.Reason)
	}
	l.append(struct {
		Time    time.Time `json:"time"`
		Session string    `json:"session_id,omitempty"`
		Run     int       `json:"run,omitempty"`
		Turn    int       `json:"turn,omitempty"`
		Hook    HookLine  `json:"hook"`
	}{t.UTC(), session, run, turn, h})
}

// writeMemory appends the line of a ruling on memory's injection (its
// message redacted): the session, run and turn, and the decision.
func (l *DecisionLog) writeMemory(p *Policy, st *kernel.State, d MemoryDecision) {
	if l.redact != nil {
		d.Message = l.redact(d.Message)
	}
	rec := struct {
		Time    time.Time       `json:"time"`
		Policy  string          `json:"policy"`
		Session string          `json:"session_id,omitempty"`
		Run     int             `json:"run,omitempty"`
		Turn    int             `json:"turn,omitempty"`
		Memory  *MemoryDecision `json:"memory"`
	}{Time: l.now().UTC(), Policy: p.name, Memory: &d}
	if st != nil {
		rec.Session, rec.Run, rec.Turn = st.SessionID, st.Run, st.Turn
	}
	l.append(rec)
}
