package kernel

import (
	"context"
	"errors"
	"fmt"
)

// ContextConfig sets when the loop warns about, compacts and hard-limits
// the context. Fractions are of Config.ContextWindow; the zero value of
// each field means its default. Nothing here applies without a window.
type ContextConfig struct {
	// Warn emits context.warning once per run when a request reaches it
	// (default 0.6).
	Warn float64
	// Compact trims large tool results and, if that is not enough,
	// summarises the oldest part of the history (default 0.7). 1 or more
	// never compacts.
	Compact float64
	// Hard is the most a request may take (default 0.85): above it after
	// compacting, the oldest exchanges are left out of the request, and a
	// request that still does not fit fails with ErrContextExceeded. The
	// rest of the window is for the answer.
	Hard float64
	// Keep is how much of the window the recent exchanges kept verbatim
	// after a summary may take (default 0.3).
	Keep float64
	// TrimTokens is the size above which a tool result is cut to its head
	// and tail before anything is summarised (default 1/8 of the window).
	TrimTokens int
	// Model summarises (default Config.Model); Prompt is its instruction
	// (default DefaultCompactionPrompt).
	Model  string
	Prompt string
}

// DefaultCompactionPrompt is the summariser's instruction when the config
// sets none.
const DefaultCompactionPrompt = `You compact the history of an agent's conversation so the agent can continue its work with less context.
Write a summary that lets the agent continue without the original messages: the user's goals and constraints, decisions made and why,
facts learnt from tools (file names, paths, identifiers, numbers, errors) that may matter later, what is done and what remains.
Keep every exact identifier the agent may need. Do not invent anything. Do not address the user. Plain text, at most 400 words.`

// ErrContextExceeded is returned when a request does not fit the context
// window even with only the latest exchange in it.
var ErrContextExceeded = errors.New("request does not fit the context window")

func (c ContextConfig) withDefaults(window int) ContextConfig {
	if c.Warn <= 0 {
		c.Warn = 0.6
	}
	if c.Compact <= 0 {
		c.Compact = 0.7
	}
	if c.Hard <= 0 {
		c.Hard = 0.85
	}
	if c.Keep <= 0 {
		c.Keep = 0.3
	}
	if c.TrimTokens <= 0 {
		c.TrimTokens = max(window/8, 64)
	}
	if c.Prompt == "" {
		c.Prompt = DefaultCompactionPrompt
	}
	return c
}

// ContextUse is what policy sees of the context ("context.*"): the tokens
// the next request takes, the window, and their ratio.
type ContextUse struct {
	Used     int     `yaml:"used"`
	Window   int     `yaml:"window"`
	Fraction float64 `yaml:"fraction"`
}

// ctxState is a run's incremental token accounting. tok holds, for every
// message of run.msgs, what it takes in a request (0 for records and for
// messages a summary replaced); every message is counted once, when it is
// appended.
type ctxState struct {
	count func(string) int
	exact bool // a real tokenizer: no calibration
	tok   []int
	sum   int // the view's messages
	// rec is the latest compaction record; start indexes the first message
	// after rec.Through.
	rec   *Compaction
	start int
	// tools is the tokens of the last offered tools by name.
	tools   map[string]int
	toolSum int
	lastRaw int // the last request's uncalibrated count
	// trimmed caches the count of a trimmed tool result by index and size.
	trimmed  map[[2]int]int
	warnedAt bool
}

// ctxOn reports whether the run accounts context.
func (r *run) ctxOn() bool { return r.k.cfg.ContextWindow > 0 }

// initContext counts the loaded history once and applies its latest
// compaction record.
func (r *run) initContext() {
	k := r.k
	cx := &ctxState{count: estimate, tools: map[string]int{}}
	if k.cfg.Tokenizer != nil {
		cx.count, cx.exact = k.cfg.Tokenizer.Count, true
	}
	cx.tok = make([]int, len(r.msgs), cap(r.msgs))
	for i := range r.msgs {
		m := &r.msgs[i]
		if m.Role == RoleCompaction {
			if c, err := ParseCompaction(m); err == nil {
				cx.rec = c
			}
			continue
		}
		cx.tok[i] = countMessage(cx.count, m)
	}
	r.cx = cx
	for i := range r.msgs {
		r.recountEdits(&r.msgs[i])
	}
	r.applyRecord()
}

// recountEdits counts again the messages whose content m's edits replace
// in every request (hooks' edits, HookRecord), adjusting the view's sum.
func (r *run) recountEdits(m *Message) {
	if !m.hasEdits() {
		return
	}
	cx := r.cx
	for _, e := range m.Hooks.Edits {
		j := seqIndex(r.msgs, e.Seq)
		if j < 0 {
			continue
		}
		c := r.msgs[j]
		c.Content = e.Content
		n := countMessage(cx.count, &c)
		if cx.rec == nil || e.Seq > cx.rec.Through || e.Seq == cx.rec.KeepUser {
			cx.sum += n - cx.tok[j]
		}
		cx.tok[j] = n
	}
}

// applyRecord recomputes the view's sum after a compaction record: the
// messages it replaced count 0, the tool results it trims count trimmed.
func (r *run) applyRecord() {
	cx := r.cx
	cx.sum = r.viewSum(cx.rec, true)
	cx.start = r.sysN
	if cx.rec != nil {
		for cx.start < len(r.msgs) && r.msgs[cx.start].Seq <= cx.rec.Through {
			cx.start++
		}
	}
}

// viewSum is the tokens of the messages a request holds under rec, from
// the cached counts; with update it keeps the trimmed counts.
func (r *run) viewSum(rec *Compaction, update bool) int {
	cx := r.cx
	sum := 0
	for i := range r.msgs {
		m := &r.msgs[i]
		if m.Role == RoleCompaction || rec != nil && i >= r.sysN && m.Seq <= rec.Through && m.Seq != rec.KeepUser {
			continue
		}
		n := cx.tok[i]
		if rec != nil {
			n = cx.trimmedTokens(i, m, n, rec)
			if update {
				cx.tok[i] = n
			}
		}
		sum += n
	}
	if rec != nil && rec.Summary != "" {
		sum += cx.count(summarySeparator + SummaryPrefix + rec.Summary)
		if r.sysN == 0 {
			sum += perMessage
		}
	}
	return sum
}

// trimmedTokens is what m takes once rec trims it (n, its count, when rec
// leaves it whole).
func (cx *ctxState) trimmedTokens(i int, m *Message, n int, rec *Compaction) int {
	if m.Role != RoleTool || m.Seq > rec.TrimThrough {
		return n
	}
	key := [2]int{i, rec.TrimBytes}
	if t, ok := cx.trimmed[key]; ok {
		return t
	}
	t, ok := trimText(m.Content, rec.TrimBytes)
	if !ok {
		return n
	}
	c := *m
	c.Content = t
	n = countMessage(cx.count, &c)
	if cx.trimmed == nil {
		cx.trimmed = map[[2]int]int{}
	}
	cx.trimmed[key] = n
	return n
}

// calibrated scales a raw count by what the model's reported usage taught
// (nothing with a real tokenizer).
func (r *run) calibrated(raw int) int {
	if r.cx.exact {
		return raw
	}
	return int(float64(raw)*r.k.calib.get(r.k.cfg.Model) + 0.5)
}

// added accounts the message just appended to r.msgs.
func (r *run) added() {
	cx := r.cx
	i := len(r.msgs) - 1
	m := &r.msgs[i]
	cx.tok = append(cx.tok, 0)
	if m.Role == RoleCompaction {
		if c, err := ParseCompaction(m); err == nil {
			cx.rec = c
			r.applyRecord()
		}
	} else {
		cx.tok[i] = countMessage(cx.count, m)
		cx.sum += cx.tok[i]
		r.recountEdits(m)
	}
	r.useContext()
}

// setTools accounts the tools offered in the next request (counted once
// per tool name).
func (r *run) setTools(tools []ToolSpec) {
	cx := r.cx
	sum := 0
	for i := range tools {
		t := &tools[i]
		n, ok := cx.tools[t.Name]
		if !ok {
			n = countTool(cx.count, t)
			cx.tools[t.Name] = n
		}
		sum += n
	}
	cx.toolSum = sum
}

// useContext updates the policy's view of the context.
func (r *run) useContext() ContextUse {
	cx := r.cx
	raw := cx.sum + cx.toolSum + perReply
	cx.lastRaw = raw
	used := r.calibrated(raw)
	w := r.k.cfg.ContextWindow
	u := ContextUse{Used: used, Window: w, Fraction: float64(used) / float64(w)}
	r.st.Context = u
	return u
}

// request returns the messages of the next request: the view of the
// history, compacted when it reaches the compact threshold, and fitted
// under the hard limit.
func (r *run) request(ctx context.Context, tools []ToolSpec) ([]Message, error) {
	if !r.ctxOn() {
		return r.history(), nil
	}
	k := r.k
	cc := k.cfg.Context.withDefaults(k.cfg.ContextWindow)
	r.setTools(tools)
	u := r.useContext()
	if u.Fraction >= cc.Warn && !r.cx.warnedAt {
		r.cx.warnedAt = true
		k.emitIf(func() Event { return ContextWarning{Used: u.Used, Window: u.Window, Fraction: u.Fraction} })
	}
	if u.Fraction >= cc.Compact && cc.Compact < 1 {
		if err := r.compact(ctx, cc, false); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !errors.Is(err, errNothingToCompact) {
				k.emitIf(func() Event {
					return Notice{Source: "context", Level: "warn", Text: "compaction failed, leaving old exchanges out instead: " + err.Error()}
				})
			}
		}
		u = r.useContext()
	}
	msgs := r.view()
	hard := int(cc.Hard * float64(k.cfg.ContextWindow))
	if u.Used <= hard {
		return msgs, nil
	}
	return r.drop(msgs, tools, hard)
}

// view is the request built from the history and its latest record.
func (r *run) view() []Message {
	if r.cx == nil || r.cx.rec == nil {
		return r.history()
	}
	return buildView(r.msgs[:r.sysN], r.msgs[r.sysN:], r.cx.rec)
}

// drop leaves the oldest exchanges out of msgs until the request fits
// under limit tokens; an exchange starts at a user message, so tool calls
// are never separated from their results.
func (r *run) drop(msgs []Message, tools []ToolSpec, limit int) ([]Message, error) {
	cx := r.cx
	count := func(ms []Message) int { return r.calibrated(countRequest(TokenizerFunc(cx.count), ms, tools)) }
	sys := 0
	for sys < len(msgs) && msgs[sys].Role == RoleSystem {
		sys++
	}
	total := count(msgs)
	for start := sys + 1; start < len(msgs); start++ {
		if msgs[start].Role != RoleUser {
			continue
		}
		out := append(msgs[:sys:sys], msgs[start:]...)
		if n := count(out); n <= limit {
			r.k.emitIf(func() Event {
				return ContextCompacted{Kind: "dropped", Dropped: start - sys, Kept: len(out) - sys, EstimatedTokens: n, TokensBefore: total, TokensAfter: n}
			})
			return out, nil
		}
	}
	return nil, fmt.Errorf("%w: %d tokens, the hard limit is %d of a %d-token window (compact the session, raise context.hard, or trim what the tools return)",
		ErrContextExceeded, total, limit, r.k.cfg.ContextWindow)
}
