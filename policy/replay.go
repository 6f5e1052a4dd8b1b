package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// ReplayReport says what a policy would have decided on every tool call of
// a stored session.
type ReplayReport struct {
	Session                  string
	Policy, Revision, SHA256 string
	Calls                    []ReplayedCall
	// Changed counts the calls whose verdict would change.
	Changed int
}

// ReplayedCall is one recorded call, what happened to it, and what the
// policy would decide now.
type ReplayedCall struct {
	// Run and Turn locate the call: the run (user prompt) and the turn
	// (model generation) in it that asked for it.
	Run, Turn int
	CallID    string
	Tool      string
	Args      string
	// Was is the recorded verdict: allow (the call ran, or was approved and
	// ran), ask (awaiting approval or rejected), deny (denied or not
	// offered), or "" when the call never reached policy (bad arguments,
	// unknown tool, deferred, cancelled, interrupted).
	Was kernel.Effect
	// WasDetail is how the call ended: ran, tool error, denied, not
	// offered, awaiting approval, rejected, ...
	WasDetail string
	// Now is the policy's verdict; NotOffered is set when the call is
	// denied because the tool would not be offered in that generation.
	Now        kernel.Effect
	NotOffered bool
	Rules      []string
	Message    string
	Changed    bool
}

// Replay re-decides every recorded tool call of sess under p, rebuilding
// the state each call saw with kernel.WalkState, the function the kernel
// resumes sessions with: run and turn numbers, prompts, times, tool counts
// and each run's calls with their outcomes. run.max_turns reads
// kernel.DefaultMaxTurns (the session does not record the cap it ran
// under). Token and cost fields read 0 (the store does not keep usage per
// message), so rules and surfaces that depend on them may differ from the
// live run. tools are the registered tools' specs (tier, tags, schema);
// tools not among them fall back to BuiltinSpecs, then to a bare name.
// Arguments are those the model sent (before hooks rewrote them).
func Replay(ctx context.Context, p *Policy, sess *kernel.Session, tools []kernel.ToolSpec) (*ReplayReport, error) {
	rep := &ReplayReport{Session: sess.Meta.ID, Policy: p.name, Revision: p.revision, SHA256: p.sha}
	specs := newSpecSet(tools)
	for name, s := range p.specs.byName {
		if _, ok := specs.byName[name]; !ok {
			specs.byName[name] = s
		}
	}
	m := new(vm.VM)
	msgs := sess.Messages
	_, err := kernel.WalkState(sess, kernel.DefaultMaxTurns, func(i int, st *kernel.State) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("replay session %s: %w", sess.Meta.ID, err)
		}
		msg := &msgs[i]
		if msg.Role != kernel.RoleAssistant || len(msg.ToolCalls) == 0 {
			return nil
		}
		// The results of this message's calls are the tool messages that
		// follow it (call ids are only unique within a message).
		results := map[string]*kernel.Message{}
		for j := i + 1; j < len(msgs) && msgs[j].Role == kernel.RoleTool; j++ {
			results[msgs[j].ToolCallID] = &msgs[j]
		}
		all := make([]kernel.ToolSpec, 0, len(msg.ToolCalls))
		for _, tc := range msg.ToolCalls {
			all = append(all, specs.get(tc.Name))
		}
		offered := map[string]bool{}
		for _, s := range p.Surface(ctx, st, all) {
			offered[s.Name] = true
		}
		for _, tc := range msg.ToolCalls {
			rc := ReplayedCall{Run: st.Run, Turn: st.Turn, CallID: tc.ID, Tool: tc.Name, Args: tc.Arguments}
			if r, ok := results[tc.ID]; ok {
				_, rc.WasDetail = kernel.StoredOutcome(r)
			} else if sess.Pending != nil && sess.Pending.Call.ID == tc.ID && lastWithCalls(msgs, i) {
				rc.WasDetail = "awaiting approval"
			} else {
				rc.WasDetail = "no result"
			}
			rc.Was = wasEffect(rc.WasDetail)
			p.redecide(m, st, &rc, tc, specs.get(tc.Name), offered[tc.Name])
			rep.Calls = append(rep.Calls, rc)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, c := range rep.Calls {
		if c.Changed {
			rep.Changed++
		}
	}
	return rep, nil
}

// lastWithCalls reports whether msgs[i] is the last assistant message
// with tool calls (the only one a pending approval can belong to).
func lastWithCalls(msgs []kernel.Message, i int) bool {
	for _, m := range msgs[i+1:] {
		if m.Role == kernel.RoleAssistant && len(m.ToolCalls) > 0 {
			return false
		}
	}
	return true
}

func (p *Policy) redecide(m *vm.VM, st *kernel.State, rc *ReplayedCall, tc kernel.ToolCall, spec kernel.ToolSpec, offered bool) {
	call, err := kernel.NewCall(tc.ID, spec, json.RawMessage(tc.Arguments), st)
	if err != nil {
		rc.Message = "arguments do not parse: " + err.Error()
		return
	}
	if !offered {
		rc.Now, rc.NotOffered = kernel.EffectDeny, true
		rc.Message = tc.Name + " would not be offered"
	} else {
		e := p.entry(spec.Name)
		env := new(Env)
		env.fillState(st)
		env.fillCall(call, e.extractor(spec.Schema))
		d := p.decideIndexed(m, env, e)
		rc.Now, rc.Rules, rc.Message = d.Effect, d.Rules, d.Message
	}
	rc.Changed = rc.Was != "" && rc.Was != rc.Now
}

func wasEffect(detail string) kernel.Effect {
	switch detail {
	case "ran", "ran (tool error)":
		return kernel.EffectAllow
	case "denied", "not offered":
		return kernel.EffectDeny
	case "awaiting approval", "rejected", "approval expired":
		return kernel.EffectAsk
	}
	return ""
}

// Format writes the report: one line per call, changed calls marked, and
// a summary.
func (r *ReplayReport) Format(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "replay of session %s under policy %s (revision %s, sha256 %s)\n", r.Session, r.Policy, r.Revision, short(r.SHA256))
	for i, c := range r.Calls {
		was := string(c.Was)
		if was == "" {
			was = "-"
		}
		now := string(c.Now)
		if c.NotOffered {
			now += " (not offered)"
		} else if len(c.Rules) > 0 {
			now += " by " + strings.Join(c.Rules, ", ")
		}
		if now == "" {
			now = "-"
		}
		mark := ""
		if c.Changed {
			mark = "  CHANGED"
		}
		fmt.Fprintf(&b, "#%d run %d turn %d %s %s\n    was %s (%s), now %s%s\n", i+1, c.Run, c.Turn, c.Tool, oneLine(c.Args, 120), was, c.WasDetail, now, mark)
		if c.Changed && c.Message != "" {
			fmt.Fprintf(&b, "    %s\n", c.Message)
		}
	}
	fmt.Fprintf(&b, "%d calls, %d would change\n", len(r.Calls), r.Changed)
	_, err := io.WriteString(w, b.String())
	return err
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
