package hooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// PluginHooks runs hooks that subprocess plugins serve (kind plugin,
// Options.Plugins): plugins/subprocess.Host is one. The documents are the
// command hooks' (Input or PointDocument in, Output or Reply out).
type PluginHooks interface {
	// HasPlugin reports whether a plugin of that name is loaded.
	HasPlugin(name string) bool
	// RunHook runs a plugin's hook on an input document and returns its
	// reply document (empty: allow).
	RunHook(ctx context.Context, plugin, hook string, input []byte) ([]byte, error)
}

// pluginHook is a rule of kind plugin.
type pluginHook struct {
	doc     *commandHook // the documents: the command protocol's
	host    PluginHooks
	plugin  string
	hook    string
	timeout time.Duration
}

// newPluginHook checks a plugin rule.
func newPluginHook(r Rule, phase Phase, opts Options, field string) (*pluginHook, []error) {
	p := r.Plugin
	bad := func(f, format string, args ...any) []error {
		return []error{hookError(r.Name, field+"."+f, fmt.Errorf(format, args...))}
	}
	switch {
	case p.Name == "":
		return nil, bad("name", "is required: the plugin's name in tools.plugins")
	case p.Hook == "":
		return nil, bad("hook", "is required: the hook's name in the plugin")
	case p.Timeout < 0 || p.Timeout.D() > MaxCommandTimeout:
		return nil, bad("timeout", "must be between 0 and %s, got %s", MaxCommandTimeout, p.Timeout)
	case opts.Plugins == nil || !opts.Plugins.HasPlugin(p.Name):
		return nil, bad("name", "no plugin %q is loaded: add it to tools.plugins", p.Name)
	}
	ph := &pluginHook{doc: &commandHook{name: r.Name, phase: phase, message: r.Message}, host: opts.Plugins,
		plugin: p.Name, hook: p.Hook, timeout: p.Timeout.D()}
	if ph.timeout == 0 {
		ph.timeout = DefaultCommandTimeout
	}
	return ph, nil
}

// run asks the plugin, within the hook's timeout.
func (p *pluginHook) run(ctx context.Context, input []byte) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	deadline, _ := rctx.Deadline()
	reply, err := p.host.RunHook(rctx, p.plugin, p.hook, input)
	// The plugin may end the call at its deadline a moment before rctx's
	// timer fires (on a loaded machine the timer's goroutine can run
	// late): the host then says context.DeadlineExceeded, or the plugin's
	// handler returns a reply when its own deadline (never before ours)
	// ends it. An answer that comes at or past the deadline did not come
	// in time, whatever it says: the hook fails closed.
	if ctx.Err() == nil && (rctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || !time.Now().Before(deadline)) {
		return nil, fmt.Errorf("plugin %s: hook %s did not answer within %s", p.plugin, p.hook, p.timeout)
	}
	return reply, err
}

func compilePluginTool(h *hook, r Rule, opts Options, field string) []error {
	p, errs := newPluginHook(r, h.phase, opts, field)
	if errs != nil {
		return errs
	}
	verdict := func(ctx context.Context, c *kernel.Call, res *kernel.Result, rerr error) (Verdict, error) {
		in, err := p.doc.input(c, res, rerr)
		if err != nil {
			return Verdict{}, fmt.Errorf("encode the hook input: %w", err)
		}
		reply, err := p.run(ctx, in)
		if err != nil {
			return Verdict{}, err
		}
		return p.doc.verdict(reply)
	}
	if h.phase == PhaseBefore {
		h.before = func(ctx context.Context, c *kernel.Call) (Verdict, error) { return verdict(ctx, c, nil, nil) }
	} else {
		h.after = func(ctx context.Context, c *kernel.Call, res kernel.Result, err error) (Verdict, error) {
			return verdict(ctx, c, &res, err)
		}
	}
	return nil
}

func compilePluginPoint(ph *PointHook, r Rule, opts Options, field string) []error {
	p, errs := newPluginHook(r, ph.point, opts, field)
	if errs != nil {
		return errs
	}
	concurrent := ph.concurrent
	ph.fn = func(ctx context.Context, in PointInput) (Reply, error) {
		doc, err := PointDocument(r.Name, in, concurrent)
		if err != nil {
			return Reply{}, fmt.Errorf("encode the hook input: %w", err)
		}
		reply, err := p.run(ctx, doc)
		if err != nil {
			return Reply{}, err
		}
		return parseWithMessage(in.Info().Point, reply, r.Message)
	}
	return nil
}
