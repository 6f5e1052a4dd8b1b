package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

func (cfg *Config) hooksConfig() (hooks.Config, error) {
	var hc hooks.Config
	if err := cfg.section("hooks", &cfg.Hooks, &hc); err != nil {
		return hc, err
	}
	return hc, nil
}

// loadHooks builds the hook chain: the configured rules plus the built-in
// credential scrubber and output limiter, which are on by default. The
// chain is one kernel.Hook that reloads atomically.
func (a *app) loadHooks() error {
	hc, err := a.cfg.hooksConfig()
	if err != nil {
		return err
	}
	opts := a.cfg.hooksOptions()
	opts.Log = a.logHook
	if a.plugins != nil { // hooks of kind plugin
		opts.Plugins = a.plugins
	}
	chain, err := hooks.NewChain(hc, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", a.cfg.source(), err)
	}
	a.chain = chain
	a.hooks = []kernel.Hook{chain.Hook()}
	a.points = chain.Points()
	a.scrub = chain.Scrub
	return nil
}

// logHook writes a lifecycle hook's decision to the decision log, once the
// policy opened one (policy.decision_log).
func (a *app) logHook(d hooks.Record) {
	if l := a.decisionLog; l != nil {
		l.WriteHook(d.Time, d.SessionID, d.Run, d.Turn, policy.HookLine{Hook: d.Hook, Point: d.Point, Outcome: d.Outcome, Reason: d.Reason})
	}
}

// reloadHooks re-reads the configuration files and swaps in their hooks;
// a bad configuration keeps the running chain and reports why.
func (a *app) reloadHooks() {
	ev := kernel.ConfigReloaded{What: "hooks", Source: a.cfg.source()}
	var loaded *Config
	err := func() error {
		cfg, err := loadConfig(a.cfg.files...)
		if err != nil {
			return err
		}
		if err := cfg.checkProtected(); err != nil {
			return err
		}
		loaded = cfg
		hc, err := cfg.hooksConfig()
		if err != nil {
			return err
		}
		return a.chain.Reload(hc)
	}()
	if err != nil {
		ev.Error = oneLine(err)
	}
	a.emit(ev)
	if loaded != nil {
		a.reloadDeclared(loaded) // the declared tools live in the same files
	}
}

// watchConfig reloads the hooks when a configuration file changes, and the
// hooks and the policy on SIGHUP. Its goroutine is owned by the app.
func (a *app) watchConfig() error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var events chan fsnotify.Event
	var w *fsnotify.Watcher
	if len(a.cfg.files) > 0 && a.chain != nil {
		var err error
		if w, err = fsnotify.NewWatcher(); err != nil {
			signal.Stop(hup)
			return fmt.Errorf("watch configuration: %w", err)
		}
		dirs := map[string]bool{}
		for _, f := range a.cfg.files {
			dirs[filepath.Dir(f)] = true
		}
		for d := range dirs {
			if err := w.Add(d); err != nil { // directories: editors replace files by rename
				w.Close()
				signal.Stop(hup)
				return fmt.Errorf("watch configuration %s: %w", d, err)
			}
		}
		events = w.Events
	}
	watched := map[string]bool{}
	for _, f := range a.cfg.files {
		watched[f] = true
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		var debounce <-chan time.Time
		for {
			select {
			case <-hup:
				if a.chain != nil {
					a.reloadHooks()
				}
				if a.policyWatcher != nil {
					_ = a.policyWatcher.Reload(context.Background()) // its event reports the outcome
				}
			case e, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				if watched[filepath.Clean(e.Name)] && e.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
					debounce = time.After(150 * time.Millisecond)
				}
			case <-debounce:
				debounce = nil
				a.reloadHooks()
			case <-done:
				return
			}
		}
	}()
	a.closers = append(a.closers, func() error {
		signal.Stop(hup)
		close(done)
		<-exited
		if w != nil {
			return w.Close()
		}
		return nil
	})
	return nil
}
