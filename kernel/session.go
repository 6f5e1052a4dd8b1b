package kernel

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Interrupted is the content given to a tool call that has no result when a
// session is loaded: the process stopped (crashed, was killed) while the call
// was running.
const Interrupted = "interrupted: the kernel stopped before this call returned a result; it may or may not have run"

// Cancelled is the content given to tool calls a cancelled run left without
// a result.
const Cancelled = "cancelled: the run was cancelled before this call finished"

// open loads sessionID (or starts a new session when it is empty) and
// repairs a history left by a crash: tool calls without a result get an
// Interrupted result, made durable before anything else happens.
func (k *Kernel) open(ctx context.Context, sessionID string) (*run, error) {
	now := k.cfg.Now()
	r := &run{k: k, started: time.Now()}
	r.deltaFn = r.onDelta
	if sessionID == "" {
		// A new session: room for the prompt and a few turns without growing.
		r.msgs = make([]Message, 0, 8)
		if k.cfg.SystemPrompt != "" {
			r.msgs = append(r.msgs, Message{Role: RoleSystem, Content: k.cfg.SystemPrompt})
			r.sysN = 1
		}
		r.isNew = true
		r.meta = SessionMeta{ID: NewID(), Model: k.cfg.Model, Status: StatusIdle, Created: now, Updated: now}
	} else {
		s, err := k.cfg.Store.Load(ctx, sessionID)
		if err != nil {
			return nil, fmt.Errorf("load session %s: %w", sessionID, err)
		}
		r.meta, r.pending = s.Meta, s.Pending
		if k.cfg.Model != "" {
			r.meta.Model = k.cfg.Model
		}
		if k.cfg.SystemPrompt == "" {
			r.msgs = s.Messages // clipped by the store: appending copies once
		} else {
			r.msgs = make([]Message, 1, len(s.Messages)+9)
			r.msgs[0] = Message{Role: RoleSystem, Content: k.cfg.SystemPrompt}
			r.msgs = append(r.msgs, s.Messages...)
			r.sysN = 1
		}
	}
	r.res.SessionID = r.meta.ID
	r.st = State{
		SessionID: r.meta.ID, Model: r.meta.Model, Labels: r.meta.Labels, MaxTurns: k.cfg.MaxTurns,
		SessionTurns: r.meta.Turns, Usage: r.meta.Usage, CostUSD: r.meta.CostUSD,
		SessionCreated: r.meta.Created, RunStarted: now, Now: now,
	}
	for _, m := range r.msgs[r.sysN:] {
		if m.Role == RoleTool {
			r.countTool(m.ToolName)
		}
	}
	if err := r.repair(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// countTool counts a call of name in the session's totals.
func (r *run) countTool(name string) {
	if r.st.ToolCounts == nil {
		r.st.ToolCounts = map[string]int{}
	}
	r.st.ToolCounts[name]++
}

// repair completes the tool calls of the last assistant message that have
// no result (other than the one awaiting approval) with Interrupted.
func (r *run) repair(ctx context.Context) error {
	last := -1
	for i := len(r.msgs) - 1; i >= r.sysN; i-- {
		if r.msgs[i].Role == RoleAssistant {
			last = i
			break
		}
		if r.msgs[i].Role != RoleTool {
			return nil
		}
	}
	if last < 0 || len(r.msgs[last].ToolCalls) == 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range r.msgs[last+1:] {
		answered[m.ToolCallID] = true
	}
	var fix []Message
	now := r.k.cfg.Now()
	for _, c := range r.msgs[last].ToolCalls {
		if answered[c.ID] || (r.pending != nil && r.pending.Call.ID == c.ID) {
			continue
		}
		fix = append(fix, Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: r.k.interruptedResult(ctx, c, r.msgs[last].Time), IsError: true, Time: now})
	}
	if len(fix) == 0 {
		return nil
	}
	if r.meta.Status == StatusRunning {
		r.meta.Status = StatusIdle
	}
	if err := r.commit(ctx, Step{Messages: fix}); err != nil {
		return fmt.Errorf("repair session %s: %w", r.meta.ID, err)
	}
	return nil
}

// commit assigns sequence numbers to step's messages, stores the step with
// the run's metadata, and appends the messages to the history. It ignores
// ctx's cancellation: a cancelled run must still record how it ended.
func (r *run) commit(ctx context.Context, step Step) error {
	now := r.k.cfg.Now()
	seq := r.meta.LastSeq
	for i := range step.Messages {
		seq++
		step.Messages[i].Seq = seq
		if step.Messages[i].Time.IsZero() {
			step.Messages[i].Time = now
		}
	}
	meta := r.meta
	meta.LastSeq = seq
	meta.Updated = now
	step.Meta = meta
	if r.persistCtx == nil {
		r.persistCtx = context.WithoutCancel(ctx)
	}
	if err := r.k.cfg.Store.Commit(r.persistCtx, r.meta.ID, step); err != nil {
		return fmt.Errorf("persist session %s: %w", r.meta.ID, err)
	}
	r.meta = meta
	r.isNew = false
	for _, m := range step.Messages {
		r.msgs = append(r.msgs, m)
		if r.tokens != nil {
			t := estimateTokens(&m)
			r.tokens = append(r.tokens, t)
			r.tokSum += t
		}
	}
	return nil
}

func (r *run) onDelta(d Delta) {
	k := r.k
	if k.cfg.OnEvent == nil || d.Text == "" {
		return
	}
	if d.Kind == DeltaReasoning {
		k.emit(ReasoningDelta{Text: d.Text})
	} else {
		k.emit(MessageDelta{Text: d.Text})
	}
}

// fit returns the messages of the next request: the whole history, or when
// it would not fit Config.ContextWindow, the system message and the most
// recent exchanges that do (an exchange starts at a user message, so tool
// calls are never separated from their results).
func (r *run) fit() []Message {
	window := r.k.cfg.ContextWindow
	if window <= 0 {
		return r.msgs
	}
	if r.tokens == nil {
		r.tokens = make([]int, len(r.msgs), cap(r.msgs))
		for i := range r.msgs {
			r.tokens[i] = estimateTokens(&r.msgs[i])
			r.tokSum += r.tokens[i]
		}
	}
	budget := window * 3 / 4 // leave a quarter for the answer
	if r.tokSum <= budget {
		return r.msgs
	}
	sys := 0
	for i := 0; i < r.sysN; i++ {
		sys += r.tokens[i]
	}
	start, dropped := -1, sys
	lastUser := -1
	for i := r.sysN; i < len(r.msgs); i++ {
		if r.msgs[i].Role == RoleUser {
			lastUser = i
			if r.tokSum-dropped+sys <= budget {
				start = i
				break
			}
		}
		dropped += r.tokens[i]
	}
	if start < 0 {
		start = lastUser
	}
	if start <= r.sysN {
		return r.msgs
	}
	out := make([]Message, 0, r.sysN+len(r.msgs)-start)
	out = append(out, r.msgs[:r.sysN]...)
	out = append(out, r.msgs[start:]...)
	est := 0
	for i := range out {
		est += estimateTokens(&out[i])
	}
	r.k.emitIf(func() Event {
		return ContextCompacted{Dropped: start - r.sysN, Kept: len(out) - r.sysN, EstimatedTokens: est}
	})
	return out
}

func estimateTokens(m *Message) int {
	n := len(m.Content)
	for _, c := range m.ToolCalls {
		n += len(c.Name) + len(c.Arguments)
	}
	return n/4 + 4
}

// NewID returns a new identifier: 16 characters of Crockford base32, the
// first 10 encoding the time in milliseconds, so ids sort by creation.
func NewID() string {
	var b [10]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(errors.New("crypto/rand failed: " + err.Error())) // never happens on Linux
	}
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var out [16]byte
	var acc uint64
	bits, j := 0, 0
	for _, x := range b {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[j] = alphabet[(acc>>uint(bits))&31]
			j++
		}
	}
	return string(out[:])
}
