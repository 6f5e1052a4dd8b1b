package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// errNothingToCompact: the history has nothing that may be summarised (the
// latest exchange alone is over the threshold).
var errNothingToCompact = errors.New("nothing to compact: only the latest exchange is left")

// compact writes a compaction record: large tool results trimmed first and,
// when that is not enough (or force), the oldest part of the history
// summarised by the compaction model. The record is committed like any
// step; the original messages stay.
func (r *run) compact(ctx context.Context, cc ContextConfig, force bool) error {
	k, cx := r.k, r.cx
	window := k.cfg.ContextWindow
	before := r.useContext().Used
	prev := Compaction{}
	if cx.rec != nil {
		prev = *cx.rec
	}
	rec := Compaction{Through: prev.Through, Summary: prev.Summary, KeepUser: prev.KeepUser,
		TrimThrough: r.meta.LastSeq, TrimBytes: cc.TrimTokens * 3 / 2, TokensBefore: before, Forced: force}
	if k.cfg.Points.at(PointBeforeCompact, k.cfg.Points.BeforeCompact != nil) {
		in := &BeforeCompactInput{PointInfo: r.info(PointBeforeCompact), Forced: force, Messages: len(r.msgs) - cx.start, Tokens: before, Window: window}
		instr, err := r.beforeCompact(ctx, in)
		if err != nil {
			return err
		}
		if instr != "" {
			rec.Instructions = instr
			cc.Prompt = joinText(cc.Prompt, "Also follow these instructions:\n"+instr)
		}
	}
	// 1. Trim the large tool results the view still sends whole.
	trimmed := 0
	for i := cx.start; i < len(r.msgs); i++ {
		m := &r.msgs[i]
		if m.Role == RoleTool && (m.Seq > prev.TrimThrough || prev.TrimBytes != rec.TrimBytes) {
			if _, ok := trimText(m.Content, rec.TrimBytes); ok {
				trimmed++
			}
		}
	}
	rec.Trimmed = trimmed
	target := int(cc.Warn * float64(window))
	if trimmed > 0 && !force {
		after := r.measure(&rec)
		if after <= target {
			rec.TokensAfter = after
			return r.commitRecord(ctx, &rec, 0)
		}
	}
	// 2. Summarise the oldest part.
	split, err := r.split(&rec, int(cc.Keep*float64(window)))
	if err != nil {
		if trimmed > 0 {
			rec.TokensAfter = r.measure(&rec)
			return r.commitRecord(ctx, &rec, 0)
		}
		return err
	}
	start := time.Now()
	summary, usage, cost, model, err := r.summarise(ctx, cc, prev.Summary, applyEdits(r.msgs)[cx.start:split], &rec)
	if err != nil {
		return err
	}
	rec.Summary = summary
	rec.Through = r.msgs[split-1].Seq
	rec.KeepUser = 0
	for i := len(r.msgs) - 1; i >= r.sysN; i-- {
		if r.msgs[i].Role == RoleUser {
			if r.msgs[i].Seq <= rec.Through {
				rec.KeepUser = r.msgs[i].Seq
			}
			break
		}
	}
	n := 0
	for i := cx.start; i < split; i++ {
		if r.msgs[i].Role != RoleCompaction {
			n++
		}
	}
	rec.Summarised, rec.Model, rec.Usage, rec.CostUSD, rec.Duration = n, model, usage, cost, time.Since(start)
	rec.TokensAfter = r.measure(&rec)
	return r.commitRecord(ctx, &rec, len(r.msgs)-split)
}

// measure is the request's tokens if rec were applied.
func (r *run) measure(rec *Compaction) int {
	return r.calibrated(r.viewSum(rec, false) + r.cx.toolSum + perReply)
}

// split picks where the kept part starts: the earliest user or assistant
// message whose suffix fits keep tokens, never later than the last
// assistant message (a pending approval's call stays verbatim), never
// inside a tool round. It is an index into r.msgs, after the view's start.
func (r *run) split(rec *Compaction, keep int) (int, error) {
	cx := r.cx
	last := -1
	for i := len(r.msgs) - 1; i > cx.start; i-- {
		if role := r.msgs[i].Role; role == RoleAssistant || role == RoleUser {
			last = i
			if role == RoleAssistant {
				break
			}
		}
	}
	if last < 0 {
		return 0, errNothingToCompact
	}
	// Suffix sums with rec's trimming.
	suffix := 0
	best := last
	for i := len(r.msgs) - 1; i > cx.start; i-- {
		m := &r.msgs[i]
		if m.Role == RoleCompaction {
			continue
		}
		suffix += cx.trimmedTokens(i, m, cx.tok[i], rec)
		if suffix > keep {
			break
		}
		if i <= last && (m.Role == RoleUser || m.Role == RoleAssistant) {
			best = i
		}
	}
	return r.wholeTurn(best)
}

// wholeTurn moves a split that falls inside a tool-use turn back to the
// user message that opened the turn, when an answer of the turn before the
// split carries reasoning blocks: a provider that signs its thinking
// (Anthropic) needs every answer of the current turn back as it was, so
// none of them may be summarised while the rest of the turn is kept. When
// the turn opened before the view's start, nothing may be summarised.
func (r *run) wholeTurn(split int) (int, error) {
	if r.msgs[split].Role == RoleUser {
		return split, nil
	}
	open := -1
	for i := split - 1; i >= r.sysN; i-- {
		if r.msgs[i].Role == RoleUser && r.msgs[i].CorrectionKind() == "" {
			open = i
			break
		}
	}
	signed := false
	for i := max(open, r.sysN); i < split && !signed; i++ {
		signed = r.msgs[i].Role == RoleAssistant && len(r.msgs[i].ReasoningBlocks) > 0
	}
	if !signed {
		return split, nil
	}
	if open <= r.cx.start {
		return 0, errNothingToCompact
	}
	return open, nil
}

// summarise asks the compaction model for a summary of prev (the last
// summary) and msgs, in chunks that fit half the window.
func (r *run) summarise(ctx context.Context, cc ContextConfig, prev string, msgs []Message, rec *Compaction) (summary string, usage Usage, cost float64, model string, err error) {
	k := r.k
	model = cc.Model
	if model == "" {
		model = k.cfg.Model
	}
	limit := k.cfg.ContextWindow / 2
	perMsg := max(limit/4, 64)
	var chunks []string
	var b strings.Builder
	size := 0
	for i := range msgs {
		m := &msgs[i]
		if m.Role == RoleCompaction {
			continue
		}
		text := transcriptLine(m, rec)
		if t, ok := trimText(text, perMsg*3/2); ok {
			text = t
		}
		n := r.cx.count(text)
		if size+n > limit && size > 0 {
			chunks = append(chunks, b.String())
			b.Reset()
			size = 0
		}
		b.WriteString(text)
		b.WriteString("\n\n")
		size += n
	}
	if size > 0 {
		chunks = append(chunks, b.String())
	}
	summary = prev
	for _, chunk := range chunks {
		var in strings.Builder
		if summary != "" {
			in.WriteString("The summary so far:\n\n" + summary + "\n\n")
		}
		in.WriteString("The conversation to add to it:\n\n" + chunk + "\nWrite the new summary.")
		req := Request{Model: model, Messages: []Message{{Role: RoleSystem, Content: cc.Prompt}, {Role: RoleUser, Content: in.String()}}}
		// The same retries, Retry-After, retry budget and fallbacks as a
		// turn's generation (then the run's own models), reported the same
		// way; the summary's text is not streamed as an answer.
		resp, err := r.callModel(ctx, req, genCall{models: summaryModels(model, k), sink: func(Delta) {},
			account: func(resp Response) { r.account(resp.Usage, k.price(model).Cost(resp.Usage)) }})
		if err != nil {
			if ctx.Err() != nil {
				return "", usage, cost, model, ctx.Err()
			}
			return "", usage, cost, model, fmt.Errorf("compaction model call: %w", err)
		}
		if resp.Message.Model != "" {
			model = resp.Message.Model
		}
		c := k.price(model).Cost(resp.Usage)
		usage, cost = usage.Add(resp.Usage), cost+c
		r.account(resp.Usage, c)
		if strings.TrimSpace(resp.Message.Content) == "" {
			return "", usage, cost, model, errors.New("compaction model returned an empty summary")
		}
		summary = strings.TrimSpace(resp.Message.Content)
	}
	return summary, usage, cost, model, nil
}

// summaryModels are the models a summary may come from, in order: the
// compaction model, then the run's model and its fallbacks.
func summaryModels(model string, k *Kernel) []string {
	out := []string{model}
	for _, m := range append([]string{k.cfg.Model}, k.cfg.Fallbacks...) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// account adds a generation's usage and cost to the session and the run,
// where budgets see them.
func (r *run) account(u Usage, cost float64) {
	r.st.account(u, cost)
}

// transcriptLine renders one message for the summariser.
func transcriptLine(m *Message, rec *Compaction) string {
	var b strings.Builder
	switch m.Role {
	case RoleTool:
		content := m.Content
		if m.Seq <= rec.TrimThrough {
			if t, ok := trimText(content, rec.TrimBytes); ok {
				content = t
			}
		}
		b.WriteString("[tool result " + m.ToolName + "]: " + content)
	default:
		b.WriteString("[" + string(m.Role) + "]: " + m.Content)
		for _, c := range m.ToolCalls {
			b.WriteString("\n[calls " + c.Name + "]: " + c.Arguments)
		}
	}
	return b.String()
}

// commitRecord stores rec and reports it.
func (r *run) commitRecord(ctx context.Context, rec *Compaction, kept int) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := r.commit(ctx, Step{Messages: []Message{{Role: RoleCompaction, Content: string(data)}}}); err != nil {
		return err
	}
	kind := "trimmed"
	if rec.Summarised > 0 {
		kind = "summarised"
	}
	r.k.emitIf(func() Event {
		return ContextCompacted{Kind: kind, Dropped: rec.Summarised, Kept: kept, EstimatedTokens: rec.TokensAfter,
			Trimmed: rec.Trimmed, Through: rec.Through, TokensBefore: rec.TokensBefore, TokensAfter: rec.TokensAfter,
			Model: rec.Model, Usage: rec.Usage, CostUSD: rec.CostUSD, Duration: rec.Duration}
	})
	return nil
}

// Compact forces a compaction of the session: tool results trimmed and the
// history before the latest exchanges summarised, whatever the context
// holds. It needs Config.ContextWindow. The record it writes shapes every
// later request; it returns nil and no error when there is nothing to
// compact.
func (k *Kernel) Compact(ctx context.Context, sessionID string) (_ *Compaction, err error) {
	if k.cfg.ContextWindow <= 0 {
		return nil, errors.New("compact: the model's context window is unknown (set model.context_window or add the model to the catalog)")
	}
	r, err := k.open(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	defer r.dl.stop()
	if k.cfg.Observe != nil { // no run around it: observed as a direct step
		ctx = r.observe(ctx, RunInfo{Direct: true})
		defer func() { r.end(nil, err) }()
	}
	r.setTools(k.cfg.Tools.view())
	cc := k.cfg.Context.withDefaults(k.cfg.ContextWindow)
	if err := r.compact(ctx, cc, true); err != nil {
		if errors.Is(err, errNothingToCompact) {
			return nil, nil
		}
		return nil, fmt.Errorf("compact session %s: %w", sessionID, err)
	}
	return r.cx.rec, nil
}
