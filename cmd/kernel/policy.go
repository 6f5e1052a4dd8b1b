package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/agentkernel/agentkernel/internal/progress"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// PolicyConfig is the policy section of kernel.yaml.
type PolicyConfig struct {
	// File is the policy (see docs/policy.md); none means allow everything.
	File string `yaml:"file"`
	// Watch reloads the policy when the file changes (default true). SIGHUP
	// reloads it either way.
	Watch *bool `yaml:"watch"`
	// DecisionLog appends every decision as a JSON line, with argument
	// values redacted by the credential scrubber.
	DecisionLog string `yaml:"decision_log"`
}

func (cfg *Config) policyConfig() (PolicyConfig, error) {
	var pc PolicyConfig
	if err := cfg.section("policy", &cfg.Policy, &pc); err != nil {
		return pc, err
	}
	if cfg.policyFile != "" {
		pc.File = cfg.policyFile
	} else {
		pc.File = cfg.path(pc.File)
	}
	pc.DecisionLog = cfg.path(pc.DecisionLog)
	return pc, nil
}

// loadPolicy loads the configured policy (after the tools, whose names it
// lints against), starts its watcher and a SIGHUP handler.
func (a *app) loadPolicy(ctx context.Context) error {
	pc, err := a.cfg.policyConfig()
	if err != nil || pc.File == "" {
		return err
	}
	opts := policyOptions(a.cfg, a.tools.Specs())
	// The initial load may show its progress; reloads, while the kernel
	// runs, do not draw on the terminal.
	progress, initial := progressLine(a.stderr), true
	opts.Progress = func(p policy.TestProgress) {
		if initial && progress != nil {
			progress(p)
		}
	}
	if pc.DecisionLog != "" {
		f, err := openPrivate(pc.DecisionLog, true) // an existing log may be wider: narrowed to 0600
		if err != nil {
			return fmt.Errorf("policy.decision_log: %w", err)
		}
		a.closers = append(a.closers, f.Close)
		opts.Log = policy.NewDecisionLog(f, a.redact)
		a.decisionLog = opts.Log // hooks write their decisions there too
	}
	start := time.Now()
	w, err := policy.NewWatcher(ctx, policy.WatcherConfig{Path: pc.File, Options: opts,
		OnReload: func(e policy.ReloadEvent) { a.emit(e.Event()) }})
	initial = false
	if err != nil {
		return policyCancelled(err)
	}
	if v := w.Policy().TestVerdict(); a.log != nil {
		if v.CacheNote != "" {
			a.log.Warn("policy test cache", "file", pc.File, "note", v.CacheNote)
		}
		a.log.Info("policy loaded", "file", pc.File, "tests", v.Tests, "cached", v.Cached,
			"evaluated", v.Evaluated, "tests_took", v.Elapsed, "load_took", time.Since(start))
	}
	if pc.Watch == nil || *pc.Watch {
		if err := w.Start(); err != nil {
			return fmt.Errorf("watch policy %s: %w", pc.File, err)
		}
		a.closers = append(a.closers, w.Close)
	}
	a.policy = w
	a.policyWatcher = w
	// Old names still work for one release; say so where the operator
	// looks, not only in `kernel policy check`.
	if p := w.Policy(); p != nil && a.log != nil {
		for _, d := range p.Deprecated() {
			a.log.Warn("policy uses a deprecated name", "problem", d.String())
		}
	}
	return nil
}

// policyOptions are the options every policy load of the CLI uses: the
// registered tools (named as the embedded defaults' when no configuration
// file was read) and, unless --no-cache, the test cache in the user's
// cache directory.
func policyOptions(cfg *Config, tools []kernel.ToolSpec) policy.Options {
	opts := policy.Options{Tools: tools}
	if len(cfg.files) == 0 {
		opts.ToolsFrom = "the embedded defaults"
	}
	if !cfg.policyNoCache {
		opts.Cache = &policy.TestCache{Dir: filepath.Join(cacheDir(), "policy")}
	}
	return opts
}

// progressLine returns what shows a policy's tests' progress on w: one
// status line, redrawn, once the tests have run for progressAfter, and
// cleared when they end. It is nil when w is not a terminal (scripts see
// nothing).
func progressLine(w io.Writer) func(policy.TestProgress) {
	if !isTerminal(w) {
		return nil
	}
	return drawProgress(w)
}

// progressAfter is how long a policy's tests run before their progress
// shows: as long as any other status line waits (internal/progress).
const progressAfter = progress.DefaultAfter

func drawProgress(w io.Writer) func(policy.TestProgress) {
	shown, last := false, -1
	return func(p policy.TestProgress) {
		switch {
		case p.End:
			if shown {
				fmt.Fprint(w, "\r\x1b[K")
				shown, last = false, -1
			}
		case p.Elapsed >= progressAfter && p.Done != last:
			fmt.Fprintf(w, "\r\x1b[Kpolicy %s: testing %d/%d", filepath.Base(p.File), p.Done, p.Total)
			shown, last = true, p.Done
		}
	}
}

// emit sends an event that does not come from the kernel (a policy reload)
// to the same place as the kernel's.
func (a *app) emit(e kernel.Event) {
	a.sinkMu.Lock()
	sink := a.sink
	a.sinkMu.Unlock()
	if sink != nil {
		sink(e)
	}
}

// policyCancelled turns a policy load stopped by SIGINT or SIGTERM (the
// context's cancellation, see interruptContext) into exit status 130 with
// a message that says so; other errors pass unchanged.
func policyCancelled(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return exitError{code: exitInterrupt, msg: err.Error() + " (interrupted)"}
	}
	return err
}
