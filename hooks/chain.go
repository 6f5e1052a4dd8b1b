package hooks

import (
	"github.com/agentkernel/agentkernel/sandbox"

	"context"
	"fmt"
	"sync/atomic"

	"github.com/agentkernel/agentkernel/kernel"
)

// Options are the settings of a Chain that do not come from kernel.yaml.
type Options struct {
	// Dir resolves relative command paths (argv[0] with a slash): the
	// directory of kernel.yaml. Empty means the working directory.
	Dir string
	// Workspace is granted read-only to command hooks (empty: not granted).
	Workspace string
	// AllowMissing is added to every command hook's grant: the sandbox
	// layers the operator accepts to run without (kernel.yaml's
	// sandbox.allow_missing).
	AllowMissing []sandbox.Layer
	// Known are the secrets the process holds: every scrubber of the chain
	// redacts them first, and tool results lose them even when the
	// scrubber is disabled (see KnownSecrets).
	Known *KnownSecrets
	// Plugins runs the hooks of kind plugin: the loaded subprocess plugins
	// (nil: a plugin rule is a configuration error).
	Plugins PluginHooks
	// Log, when set, gets the decision of every hook at a lifecycle
	// point (the CLI writes them to policy.decision_log). It is called
	// from the runs' goroutines and must be safe for concurrent use.
	Log func(Record)
}

// Chain is the configured hooks as one reloadable kernel.Hook: the
// built-in scrubber and output limiter around the rules of Config, in
// order. Reload swaps in a new configuration atomically: each call runs
// entirely under the configuration that was current when it entered the
// chain. A Chain is safe for concurrent use.
//
// Put Chain.Hook first in kernel.Config.Hooks so that the scrubber and the
// limiter see the final result, whatever produced it:
//
//  1. the output limiter (outermost: it cuts what the model will read);
//  2. the scrubber, on the final result and on error text;
//  3. the rules, first rule outermost;
//  4. when any after rule exists, the scrubber again, right around the
//     tool, so that after hooks (command hooks included) never see a
//     credential; the outer pass then only rescans a result a hook changed;
//  5. whatever follows in kernel.Config.Hooks, then policy and the tool.
type Chain struct {
	opts Options
	cur  atomic.Pointer[compiled]
}

// NewChain compiles cfg. Errors are *ConfigError values (joined when
// several) naming the hook and the field.
func NewChain(cfg Config, opts Options) (*Chain, error) {
	comp, err := compile(cfg, opts)
	if err != nil {
		return nil, err
	}
	ch := &Chain{opts: opts}
	ch.cur.Store(comp)
	return ch, nil
}

// Reload compiles cfg and, only if it is valid, makes it the chain's
// configuration for every call that starts afterwards. On error the
// previous configuration stays in force.
func (ch *Chain) Reload(cfg Config) error {
	comp, err := compile(cfg, ch.opts)
	if err != nil {
		return fmt.Errorf("reload hooks (the previous hooks stay in force): %w", err)
	}
	ch.cur.Store(comp)
	return nil
}

// Config returns the configuration in force.
func (ch *Chain) Config() Config { return ch.cur.Load().cfg }

// Scrub scrubs s with the scrubber of the configuration in force (its
// extra and allow patterns included), even when the scrubber is disabled for
// tool results: it is meant for logs and other text the kernel writes.
func (ch *Chain) Scrub(s string) string {
	out, _ := ch.cur.Load().scrubber.Scrub(s)
	return out
}

// ScrubResult is what the scrubber in force would leave of s in a tool
// result, each line where it was (Scrubber.ScrubLines), or s itself when
// the scrubber is disabled. A tool that reports on text it does not return
// (search's match counts) matches on this, so that it never reveals what
// the scrubber hides.
func (ch *Chain) ScrubResult(s string) string {
	if sc := ch.cur.Load().scrub; sc != nil {
		return sc.ScrubLines(s)
	}
	return s
}

// Points returns the chain's hooks at the lifecycle points as
// kernel.Points, with extra (Go hooks, At) after the configured ones at
// each point. Each point runs entirely under the configuration in force
// when the loop reaches it; a reload changes the next point's hooks. The
// points are set whether or not hooks are configured there, so a reload
// can add some; Points.Active tells the loop which have hooks now, so an
// empty point costs it one check.
func (ch *Chain) Points(extra ...*PointHook) kernel.Points {
	by := byPoint(extra)
	return pointsOf(func(p kernel.HookPoint) []*PointHook {
		list := ch.cur.Load().points[p]
		if x := by[p]; len(x) > 0 {
			return append(list[:len(list):len(list)], x...)
		}
		return list
	}, func(p kernel.HookPoint) int { // as len(at(p)), without building the list
		return len(ch.cur.Load().points[p]) + len(by[p])
	}, ch.opts.Log)
}

// Hook returns the chain as one kernel.Hook. It may be used by several
// kernels.
func (ch *Chain) Hook() kernel.Hook {
	return func(next kernel.Handler) kernel.Handler { return &chainHandler{ch: ch, next: next} }
}

// compiled is one configuration, ready to run. It is immutable.
type compiled struct {
	cfg   Config
	rules []*hook
	// points are the hooks at the lifecycle points, in order (the
	// answer scrubber first at after_model).
	points     map[kernel.HookPoint][]*PointHook
	scrub      *Scrubber // nil when disabled
	scrubber   *Scrubber // the same, even when disabled (Chain.Scrub)
	limit      bool
	head, tail int
}

// chainHandler runs every call under the configuration current when the
// call arrives; the handler built for it is cached until the next reload.
type chainHandler struct {
	ch    *Chain
	next  kernel.Handler
	built atomic.Pointer[builtChain]
}

type builtChain struct {
	comp *compiled
	h    kernel.Handler
}

func (c *chainHandler) Handle(ctx context.Context, call *kernel.Call) (kernel.Result, error) {
	comp := c.ch.cur.Load()
	b := c.built.Load()
	if b == nil || b.comp != comp {
		b = &builtChain{comp: comp, h: comp.build(c.next)}
		c.built.Store(b)
	}
	return b.h.Handle(ctx, call)
}

func (comp *compiled) build(next kernel.Handler) kernel.Handler {
	h := next
	inner := false
	if comp.scrub != nil {
		for _, r := range comp.rules {
			inner = inner || r.phase == PhaseAfter
		}
	}
	if inner {
		h = &innerScrub{s: comp.scrub, next: h}
	}
	for i := len(comp.rules) - 1; i >= 0; i-- {
		h = comp.rules[i].wrap(h)
	}
	if comp.scrub != nil || comp.limit {
		h = &guard{comp: comp, next: h, inner: inner}
	}
	return h
}

func compile(cfg Config, opts Options) (*compiled, error) {
	var errs []error
	comp := &compiled{cfg: cfg}
	sc := cfg.Scrubber
	sc.Known = opts.Known
	s, err := NewScrubber(sc)
	if err != nil {
		errs = append(errs, err)
	} else {
		comp.scrubber = s
		switch {
		case enabled(cfg.Scrubber.Enabled):
			comp.scrub = s
		case opts.Known != nil:
			comp.scrub = s.onlyKnown() // the held secrets, still
		}
	}
	head, tail, err := cfg.OutputLimit.limits()
	if err != nil {
		errs = append(errs, err)
	} else if enabled(cfg.OutputLimit.Enabled) {
		comp.limit, comp.head, comp.tail = true, head, tail
	}
	if cfg.Scrubber.Answers && comp.scrubber != nil {
		comp.points = map[kernel.HookPoint][]*PointHook{kernel.PointAfterModel: {answerScrubber(comp.scrubber)}}
	}
	seen := map[string]int{}
	for i, r := range cfg.Rules {
		h, ph, rerrs := compileRule(i, r, opts, seen)
		errs = append(errs, rerrs...)
		switch {
		case h != nil:
			comp.rules = append(comp.rules, h)
		case ph != nil:
			if comp.points == nil {
				comp.points = map[kernel.HookPoint][]*PointHook{}
			}
			comp.points[ph.point] = append(comp.points[ph.point], ph)
		}
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return comp, nil
}

// guard runs the built-ins around the rules: the scrubber, then the output
// limiter, on every result the model will read.
type guard struct {
	comp  *compiled
	next  kernel.Handler
	inner bool
}

type scrubMarkKey struct{}

// scrubMark records what the inner scrubber produced for one call.
type scrubMark struct {
	done    bool
	content string
}

func (g *guard) Handle(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
	var mark *scrubMark
	if g.inner {
		mark = &scrubMark{}
		ctx = context.WithValue(ctx, scrubMarkKey{}, mark)
	}
	res, err := g.next.Handle(ctx, c)
	if awaitsApproval(err) {
		return res, err
	}
	if err != nil && res.Content == "" {
		res.Content = "error: " + err.Error() // what the loop would show; scrub it here
	}
	if s := g.comp.scrub; s != nil {
		if mark == nil || !mark.done || mark.content != res.Content {
			res.Content = scrubContent(s, c, res.Content)
		}
		err = scrubError(s, err)
	}
	if g.comp.limit {
		var cut bool
		res.Content, cut = TruncateMiddle(res.Content, g.comp.head, g.comp.tail, NameOutputLimit)
		if cut {
			c.Emit(kernel.HookRewrote{Hook: NameOutputLimit, Phase: string(PhaseAfter), CallID: c.ID(), Tool: c.Tool().Name, What: "truncated"})
		}
	}
	return res, err
}

// innerScrub scrubs the result next to the tool, before any after rule.
type innerScrub struct {
	s    *Scrubber
	next kernel.Handler
}

func (in *innerScrub) Handle(ctx context.Context, c *kernel.Call) (kernel.Result, error) {
	res, err := in.next.Handle(ctx, c)
	if awaitsApproval(err) {
		return res, err
	}
	if err != nil && res.Content == "" {
		res.Content = "error: " + err.Error()
	}
	res.Content = scrubContent(in.s, c, res.Content)
	err = scrubError(in.s, err)
	if mark, ok := ctx.Value(scrubMarkKey{}).(*scrubMark); ok {
		mark.done, mark.content = true, res.Content
	}
	return res, err
}

func scrubContent(s *Scrubber, c *kernel.Call, content string) string {
	out, n := s.Scrub(content)
	if n > 0 {
		c.Emit(kernel.HookRewrote{Hook: NameScrubber, Phase: string(PhaseAfter), CallID: c.ID(), Tool: c.Tool().Name, What: "redacted"})
	}
	return out
}

// scrubError scrubs an error's text (the audit trail and the events show
// it); errors.Is and errors.As still see the original.
func scrubError(s *Scrubber, err error) error {
	if err == nil {
		return nil
	}
	msg, n := s.Scrub(err.Error())
	if n == 0 {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

var (
	_ kernel.Handler = (*chainHandler)(nil)
	_ kernel.Handler = (*guard)(nil)
	_ kernel.Handler = (*innerScrub)(nil)
)
