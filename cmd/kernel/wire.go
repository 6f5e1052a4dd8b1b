package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/scripted"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/plugins/declared"
	"github.com/agentkernel/agentkernel/plugins/mcp"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/plugins/wasm"
	"github.com/agentkernel/agentkernel/policy"
	"github.com/agentkernel/agentkernel/telemetry"
)

// app is a configured kernel and everything it owns. cmd/kernel is the only
// place packages are wired together.
type app struct {
	cfg     *Config
	log     hclog.Logger
	tools   *kernel.Registry
	store   kernel.Store
	policy  kernel.Policy
	hooks   []kernel.Hook
	points  kernel.Points
	closers []func() error

	// sink receives events from outside the kernel (policy reloads); it is
	// the kernel's OnEvent once the kernel exists.
	sinkMu sync.Mutex
	sink   func(kernel.Event)
	scrub  func(string) string

	queue replica.Queue
	// replica names this process among those sharing a postgres store
	// (kernel serve --replica); it claims steering messages in that name.
	replica     string
	tel         *telemetry.Telemetry // nil: telemetry is off
	metricsAddr string               // the metrics listener's, once it listens
	wasm        *wasm.Host
	plugins     *subprocess.Host
	mcp         *mcp.Host
	// declared are the declared tools (tools.http, .command, .inline) and
	// declaredSum their configuration's text, for reloads (declared.go).
	declared      *declared.Set
	declaredSum   []byte
	chain         *hooks.Chain
	policyWatcher *policy.Watcher
	// decisionLog is policy.decision_log, when the policy opened one.
	decisionLog *policy.DecisionLog
	// stderr is where status lines go (internal/progress, the policy's test
	// progress): only on a terminal.
	stderr io.Writer
	// serverStore sizes the store for a long-running server (kernel serve).
	serverStore bool
	// agents are agents: and pipelines:, checked (agents.go); nil when
	// the configuration has none.
	agents *agentSetup
	// warnings are load-time notices (capabilities a module asked for and
	// was not granted), shown once the renderer exists.
	warnings []kernel.Notice
	// mem is memory (memory.go), once opened.
	mem *memorySetup
}

// newApp builds everything but the provider and the kernel: the registry of
// tools, the store, the policy and the hooks.
// loadApp loads the configuration the flags name and builds the app on
// it. protect refuses a configuration in which a tool could write the
// kernel's own files (checkProtected): every command that runs tools asks
// for it; listing commands need not.
func loadApp(ctx context.Context, cf *commonFlags, env *cliEnv, protect bool) (*app, error) {
	cfg, err := cf.load()
	if err != nil {
		return nil, err
	}
	if protect {
		if err := cfg.checkProtected(); err != nil {
			return nil, err
		}
	}
	cfg.spanExporter = env.spans
	return newApp(ctx, cfg, env.stderr)
}

func newApp(ctx context.Context, cfg *Config, stderr io.Writer) (*app, error) {
	a := &app{cfg: cfg, tools: kernel.NewRegistry(), log: newLevelLogger(stderr, cfg.logLevel), stderr: stderr}
	if err := a.startTelemetry(ctx, cfg.spanExporter); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.loadTools(ctx); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.loadHooks(); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.loadPolicy(ctx); err != nil { // after the hooks: its log uses the scrubber
		a.Close()
		return nil, err
	}
	if err := a.loadAgents(ctx); err != nil { // after the tools, which agents name
		a.Close()
		return nil, err
	}
	return a, nil
}

// newLogger is the CLI's logger: warnings and errors on stderr, more with
// KERNEL_LOG=debug.
func newLogger(stderr io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "kernel", Output: scrubWriter{stderr}, Level: hclog.LevelFromString(envOr("KERNEL_LOG", "warn"))})
}

// startKernel builds the whole kernel from the flags: tools, hooks and
// policy, the store opened for writing, the config watcher, the provider,
// with events going to r. The caller closes the app.
func startKernel(ctx context.Context, cf *commonFlags, env *cliEnv, r *renderer) (*app, *kernel.Kernel, error) {
	a, err := loadApp(ctx, cf, env, true)
	if err != nil {
		return nil, nil, err
	}
	k, err := func() (*kernel.Kernel, error) {
		if err := a.openStore(false); err != nil {
			return nil, err
		}
		if err := a.requireStoreSpace(); err != nil {
			return nil, err
		}
		if err := a.watchConfig(); err != nil {
			return nil, err
		}
		prov, err := a.provider()
		if err != nil {
			return nil, err
		}
		k, err := a.kernel(prov, r.event)
		if err != nil {
			return nil, err
		}
		// Whoever runs the CLI decides its approvals: recorded as by.
		return k.With(kernel.RunOptions{Principal: cliPrincipal()}), nil
	}()
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	a.closers = append(a.closers, a.cfg.applyPrestart(ctx))
	if err := a.serveMetrics(ctx, env.stderr); err != nil {
		a.Close()
		return nil, nil, err
	}
	r.mu.Lock()
	r.scrub = a.scrub
	r.tools = k.Tools()
	if sc, err := a.cfg.storeConfig(); err == nil && sc.Kind != "memory" && sc.Kind != "postgres" {
		r.store = storeHint(sc.Dir)
	}
	r.mu.Unlock()
	for _, n := range a.warnings {
		r.event(n)
	}
	return a, k, nil
}

// withKernel starts the kernel for one run (`run`, `approve`, `reject`)
// of session sid ("" for a new one), calls fn, and maps the outcome to the
// exit status. On a store replicas share, fn gets a kernel holding the
// session's lease (app.lease).
func withKernel(ctx context.Context, cf *commonFlags, env *cliEnv, events string, quiet bool, sid string, fn func(*kernel.Kernel) (*kernel.RunResult, error)) error {
	ev, closeEv, err := eventsWriter(events, env.stderr)
	if err != nil {
		return err
	}
	defer closeEv()
	r := newRenderer(env, quiet, ev)
	a, k, err := startKernel(ctx, cf, env, r)
	if err != nil {
		return err
	}
	defer a.Close()
	if k, err = a.runKernel(ctx, k, cf, sid); err != nil {
		return err
	}
	lk, release, err := a.lease(ctx, k, sid)
	if err != nil {
		return err
	}
	res, err := fn(lk)
	release()
	r.endLine()
	return runOutcome(res, err)
}

// cliLeaseTTL is the lease a CLI run of a shared session holds.
const cliLeaseTTL = 15 * time.Second

// lease takes session sid's lease when the store is shared (a
// kernel.Leaser: postgres) and returns k running with it, and the
// function that gives it back: a CLI run is one more writer among the
// kernel serve replicas, and holds the session the way they do. A session
// a replica runs is refused, naming it. Without a shared store, or for a
// new session (nobody else knows its id), k is returned as is.
func (a *app) lease(ctx context.Context, k *kernel.Kernel, sid string) (*kernel.Kernel, func(), error) {
	l, ok := a.store.(kernel.Leaser)
	if !ok || sid == "" {
		return k, func() {}, nil
	}
	h, err := kernel.HoldLease(ctx, l, sid, a.replicaName(), cliLeaseTTL)
	var held *kernel.LeaseHeldError
	if errors.As(err, &held) {
		return nil, nil, fmt.Errorf("session %s is running on %s (its lease lasts until %s at least): wait for that run, or steer it (kernel steer)",
			sid, held.Holder, held.Expires.Local().Format(time.TimeOnly))
	}
	if err != nil {
		return nil, nil, err
	}
	return k.With(kernel.RunOptions{Principal: cliPrincipal(), Lease: h}), func() { h.Release(context.WithoutCancel(ctx)) }, nil
}

// eventsWriter opens --events: "" is none, "-" is stderr, else a file.
func eventsWriter(events string, stderr io.Writer) (io.Writer, func(), error) {
	switch events {
	case "":
		return nil, func() {}, nil
	case "-":
		return stderr, func() {}, nil
	}
	f, err := openPrivate(events, false)
	if err != nil {
		return nil, nil, fmt.Errorf("--events: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// redact is what scrubs argument values in logs: the credential scrubber
// once the hooks are configured, otherwise nothing is logged verbatim.
func (a *app) redact(s string) string {
	if a.scrub != nil {
		return a.scrub(s)
	}
	return "[not logged]"
}

// Close releases everything the app opened, last opened first.
func (a *app) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (a *app) loadTools(ctx context.Context) error {
	if err := a.loadBuiltins(); err != nil {
		return err
	}
	if err := a.loadMemoryTool(); err != nil {
		return err
	}
	if err := a.loadDeclared(); err != nil {
		return err
	}
	if err := a.loadPlugins(ctx); err != nil {
		return err
	}
	if err := a.loadWASM(ctx); err != nil {
		return err
	}
	return a.loadMCP(ctx)
}

func (a *app) loadBuiltins() error {
	b := a.cfg.Tools.Builtin
	b.Root = a.cfg.path(a.cfg.Workspace)
	b.Protected = a.cfg.protectedPaths()
	b.Scrub = func(s string) string {
		if a.chain == nil { // the hooks load after the tools; no call runs before
			return s
		}
		return a.chain.ScrubResult(s)
	}
	if want := a.cfg.workspaceID; want != nil {
		b.RootCheck = func(fi fs.FileInfo) error {
			if now := fileID(fi); now != nil && *now != *want {
				return fmt.Errorf("the workspace %s is not the directory the session started in (device %d inode %d then, device %d inode %d now): it was moved or swapped while the kernel started",
					b.Root, want.Dev, want.Ino, now.Dev, now.Ino)
			}
			return nil
		}
	}
	b.CommandSandbox.AllowMissing = append(b.CommandSandbox.AllowMissing, a.cfg.Sandbox.AllowMissing...)
	b.CommandTraceParent = a.commandTraceParent()
	tools, closer, err := builtin.New(b)
	if err != nil {
		return fmt.Errorf("%s: tools.builtin: %w", a.cfg.source(), err)
	}
	a.closers = append(a.closers, closer.Close)
	if err := a.tools.Register(tools...); err != nil {
		return fmt.Errorf("%s: tools.builtin: %w", a.cfg.source(), err)
	}
	return nil
}

// provider builds the model provider from the config.
func (a *app) provider() (kernel.Provider, error) {
	m := a.cfg.Model
	switch m.Provider {
	case "scripted":
		if m.Script == "" {
			return nil, &ConfigError{File: a.cfg.source(), Field: "model.script", Err: errors.New("the scripted provider needs a script file (--script FILE)")}
		}
		s, err := scripted.Load(a.cfg.path(m.Script))
		if err != nil {
			return nil, err
		}
		// Old names still work for one release; say so, as for a
		// policy's (policy.go).
		for _, d := range s.Deprecated() {
			if a.log != nil {
				a.log.Warn("script uses a deprecated name", "problem", d)
			}
		}
		ms, err := a.model()
		if err != nil {
			return nil, err
		}
		if p, ok := ms.protocols[m.Name]; ok && p.Protocol == kernel.ToolProtocolText {
			// The script's calls are written in the text protocol.
			return scripted.NewText(s, p.Format)
		}
		return scripted.New(s), nil
	case "openai", "anthropic", "":
		return a.apiProviders()
	}
	return nil, &ConfigError{File: a.cfg.source(), Field: "model.provider", Err: fmt.Errorf("unknown provider %q (want openai, anthropic or scripted)", m.Provider)}
}

// kernel builds the kernel around prov, sending events to onEvent.
func (a *app) kernel(prov kernel.Provider, onEvent func(kernel.Event)) (*kernel.Kernel, error) {
	a.sinkMu.Lock()
	a.sink = onEvent
	a.sinkMu.Unlock()
	ms, err := a.model()
	if err != nil {
		return nil, err
	}
	if a.queue == nil {
		if a.queue, err = a.openQueue(); err != nil {
			return nil, err
		}
	}
	kc := kernel.Config{
		Provider:         prov,
		Store:            a.store,
		Tools:            a.tools,
		Policy:           a.policy,
		Hooks:            a.hooks,
		Model:            a.cfg.Model.Name,
		SystemPrompt:     a.cfg.SystemPrompt,
		MaxTurns:         a.cfg.Limits.MaxTurns,
		ModelTimeout:     a.cfg.Model.Timeout,
		ToolTimeout:      a.cfg.Limits.ToolTimeout,
		ToolQueueTimeout: a.cfg.Limits.ToolQueueTimeout,
		Prices:           ms.prices,
		ContextWindow:    ms.window,
		Tokenizer:        ms.tokenizer,
		Context:          a.cfg.contextConfig(),
		Inbox:            a.queue,
		ApprovalTTL:      a.cfg.Limits.ApprovalTTL,
		OnEvent:          onEvent,
		Retry:            retryPolicy(a.cfg.Model.Retry),
		Fallbacks:        a.cfg.Model.Fallbacks,
		SessionContext:   a.sessionContext(),
		ModelTools:       ms.protocols,
		MaxCorrections:   a.cfg.Limits.MaxCorrections,
		Points:           a.points,

		MaxContinuations: a.cfg.Limits.MaxContinuations,
		// What a person types is scrubbed as tool results are.
		ScrubInput: func(s string) string {
			if a.chain == nil {
				return scrubText(s)
			}
			return a.chain.ScrubResult(s)
		},

		MaxConcurrentTools: a.cfg.Limits.MaxConcurrentTools,
		MaxDepth:           a.cfg.Limits.MaxAgentDepth,
	}
	a.instrument(&kc)
	if err := a.wireMemory(&kc); err != nil {
		return nil, err
	}
	if err := a.buildAgents(kc); err != nil {
		return nil, err
	}
	return kernel.New(kc)
}
