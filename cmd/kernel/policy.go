package main

import (
	"context"
	"errors"
	"fmt"

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
	opts := policy.Options{Tools: a.tools.Specs()}
	if pc.DecisionLog != "" {
		f, err := openPrivate(pc.DecisionLog, true) // an existing log may be wider: narrowed to 0600
		if err != nil {
			return fmt.Errorf("policy.decision_log: %w", err)
		}
		a.closers = append(a.closers, f.Close)
		opts.Log = policy.NewDecisionLog(f, a.redact)
	}
	w, err := policy.NewWatcherContext(ctx, policy.WatcherConfig{Path: pc.File, Options: opts,
		OnReload: func(e policy.ReloadEvent) { a.emit(e.Event()) }})
	if err != nil {
		return policyCancelled(err)
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
