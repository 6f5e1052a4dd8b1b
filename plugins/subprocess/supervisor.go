package subprocess

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/backoff"
	"github.com/agentkernel/agentkernel/internal/supervise"
	"github.com/agentkernel/agentkernel/kernel"
)

// supervisor owns one configured plugin: its verified copy, the tools the
// kernel registered for it, and at most one running process, which it
// starts on demand, restarts after a crash with backoff, and stops calling
// (circuit breaker) after too many consecutive crashes. Safe for concurrent
// use.
type supervisor struct {
	h   *Host
	cfg PluginConfig
	exe string // the verified private copy
	// stored: exe is the binary store's entry, checked again (and
	// verified again from cfg.Path if it is gone or changed) before each
	// start; start alone writes exe and stored after Load.
	stored bool
	sum    string // its sha256
	log    hclog.Logger
	specs  map[string]toolSpec // the tools as registered with the kernel

	mu       sync.Mutex
	inst     *instance
	starting *supervise.Attempt // the start in progress, if any
	crashes  backoff.Breaker    // consecutive crashes: restart backoff and circuit breaker
	closed   bool

	gateOnce sync.Once
	gate     supervise.Gate[*instance] // acquire's state machine over the fields above
}

// acquire returns a running process, starting one if needed: it waits for
// a start in progress, waits out the backoff after a crash, and refuses
// while the circuit breaker is open (internal/supervise).
func (s *supervisor) acquire(ctx context.Context) (*instance, error) {
	s.gateOnce.Do(s.initGate)
	return s.gate.Acquire(ctx)
}

// initGate builds the supervisor's Gate (once: building it per call
// would allocate its closures per call).
func (s *supervisor) initGate() {
	s.gate = supervise.Gate[*instance]{
		Mu: &s.mu, Live: &s.inst, Starting: &s.starting, Crashes: &s.crashes, Closed: &s.closed, ErrClosed: ErrClosed,
		Dying: func(inst *instance) <-chan struct{} {
			if inst.runner.exited() {
				// Dead, and its watcher is about to say so (and count
				// the crash, which sets the backoff): wait for it.
				return inst.exited
			}
			return nil
		},
		Refused: func(now time.Time) error {
			until := s.crashes.Until()
			return fmt.Errorf("%w: it crashed %d times in a row; its tools are disabled until %s (%s from now), then the kernel tries again",
				ErrUnavailable, s.crashes.Failures(), until.Format(time.TimeOnly), until.Sub(now).Round(time.Second))
		},
		Start: s.start,
		End: func(_ error, counted bool) {
			if counted {
				s.recordCrashLocked(time.Now())
			}
		},
	}
}

// start waits out the backoff, starts a process and installs it with its
// watcher. The host cannot finish closing while it runs.
func (s *supervisor) start(ctx context.Context, wait time.Duration) (*instance, error) {
	done, err := s.h.begin()
	if err != nil {
		return nil, err
	}
	defer done()
	if wait > 0 {
		s.log.Debug("waiting before restart", "backoff", wait)
	}
	if err := backoff.Sleep(ctx, s.h.ctx.Done(), ErrClosed, wait); err != nil {
		return nil, err
	}
	if s.stored {
		exe, _, stored, err := s.h.verified(s.cfg, false)
		if err != nil {
			s.log.Error("plugin failed to start", "error", err)
			return nil, err
		}
		s.exe, s.stored = exe, stored
	}
	inst, err := startInstance(ctx, s.h, s.cfg, s.exe)
	if err != nil {
		s.log.Error("plugin failed to start", "error", err)
		return nil, err
	}
	s.log.Debug("plugin started", "pid", inst.runner.pid, "in", time.Since(inst.started))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		inst.markStopped("host closed")
		inst.runner.Kill(context.Background())
		inst.cleanup.Do(inst.client.Kill)
		return nil, ErrClosed
	}
	s.inst = inst
	s.h.wg.Add(1)
	go func() {
		defer s.h.wg.Done()
		inst.watch(s)
	}()
	s.mu.Unlock()
	s.checkSpecs(inst)
	return inst, nil
}

// recordCrashLocked counts a crash and opens the circuit breaker once
// MaxCrashes are reached in a row.
func (s *supervisor) recordCrashLocked(now time.Time) {
	if s.crashes.Failure(now) {
		until := s.crashes.Until()
		text := fmt.Sprintf("plugin %s crashed %d times in a row; its tools are unavailable until %s",
			s.cfg.Name, s.crashes.Failures(), until.Format(time.TimeOnly))
		s.log.Error("circuit breaker open", "crashes", s.crashes.Failures(), "until", until)
		s.h.notice("error", s.cfg.Name, text)
	}
}

// exited is called by an instance's watcher once its process is gone.
func (s *supervisor) exited(inst *instance, crashed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == inst {
		s.inst = nil
	}
	if crashed && !s.closed {
		s.recordCrashLocked(time.Now())
	}
}

// answered is called when the plugin answered a call: it is healthy.
func (s *supervisor) answered() {
	s.mu.Lock()
	wasOpen := s.crashes.Success()
	s.mu.Unlock()
	if wasOpen {
		s.log.Info("circuit breaker closed: the plugin answers again")
		s.h.notice("info", s.cfg.Name, fmt.Sprintf("plugin %s answers again; its tools are available", s.cfg.Name))
	}
}

// drop forgets inst as the running process (it is being killed), so that
// the next call starts a fresh one without waiting for it to die.
func (s *supervisor) drop(inst *instance) {
	s.mu.Lock()
	if s.inst == inst {
		s.inst = nil
	}
	s.mu.Unlock()
}

// checkSpecs compares a fresh process's tools with the ones registered
// (from the Describe cache) and refreshes the cache when they differ;
// calls of a tool whose spec changed are refused (see pluginTool.Call).
func (s *supervisor) checkSpecs(inst *instance) {
	live := map[string]toolSpec{}
	for _, sp := range inst.specs {
		live[sp.Name] = sp
	}
	changed := len(live) != len(s.specs)
	for name, reg := range s.specs {
		if l, ok := live[name]; !ok || !l.equal(reg) {
			changed = true
			s.log.Warn("tool changed since it was registered; calls are refused until the kernel restarts", "tool", name)
		}
	}
	if changed {
		s.h.writeCache(s.cfg, s.sum, inst.specs, inst.sdkVersion)
	}
}

// close stops the running process, if any. Calls fail with ErrClosed
// afterwards.
func (s *supervisor) close() {
	s.mu.Lock()
	s.closed = true
	inst := s.inst
	s.inst = nil
	s.mu.Unlock()
	if inst != nil {
		inst.shutdown("host closed")
	}
}

// toolError wraps err as the kernel's tool error for tool.
func toolError(tool, code string, err error) *kernel.ToolError {
	return &kernel.ToolError{Tool: tool, Code: code, Err: err}
}
