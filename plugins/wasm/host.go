package wasm

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"

	"github.com/agentkernel/agentkernel/internal/cachemac"
	"github.com/agentkernel/agentkernel/internal/privfile"
	"github.com/agentkernel/agentkernel/kernel"
)

// Host loads WASM tool modules and runs their calls. It owns every module's
// runtime, compiled code, pool goroutine and mounted directory until Close.
// A Host is safe for concurrent use.
type Host struct {
	log      hclog.Logger
	cacheDir string
	// cacheRoot is this format's directory in cacheDir; cacheKey
	// authenticates its entries.
	cacheRoot string
	cacheKey  *cachemac.Key
	schema    *manifestSchema
	budget    *memoryBudget
	running   runSlots
	// compiling is HostConfig.Compiling.
	compiling func(module string) (done func())

	// life is cancelled by Close; every call is cancelled with it.
	life     context.Context
	lifeStop context.CancelFunc

	mu      sync.Mutex
	closed  bool
	modules []*module
	caches  map[string]*sharedCache // by module sha256
	calls   sync.WaitGroup          // calls in flight
}

// NewHost prepares a Host: it creates the cache directory (0700) and its
// MAC key (0600), and compiles the manifest schema. ctx's values (not its cancellation) are kept
// for background work such as pool refills.
func NewHost(ctx context.Context, cfg HostConfig) (*Host, error) {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	dir := cfg.CacheDir
	if dir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	root, err := cacheRoot(dir, warnTo(log))
	if err != nil {
		return nil, err
	}
	key, err := cachemac.Open(root, "wasm", warnTo(log))
	if err != nil {
		return nil, err
	}
	if cfg.MemoryBudgetMB < 0 {
		return nil, fmt.Errorf("%w: memory budget %d MiB is negative", ErrConfig, cfg.MemoryBudgetMB)
	}
	if cfg.MaxRunning < 0 {
		return nil, fmt.Errorf("%w: max running %d is negative", ErrConfig, cfg.MaxRunning)
	}
	running := cfg.MaxRunning
	if running == 0 {
		running = DefaultMaxRunning()
	}
	budget := cfg.MemoryBudgetMB
	if budget == 0 {
		budget = DefaultMemoryBudgetMB()
	}
	schema, err := compileManifestSchema()
	if err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	return &Host{log: log, cacheDir: dir, cacheRoot: root, cacheKey: key, schema: schema, budget: newMemoryBudget(budget), running: newRunSlots(running), life: life, lifeStop: stop, caches: map[string]*sharedCache{},
		compiling: cfg.Compiling}, nil
}

// CacheDir is the directory compiled modules are kept in.
func (h *Host) CacheDir() string { return h.cacheDir }

// Load reads a module's manifest, checks it and the configuration, opens
// the granted directories and returns the module's tools. It does not read
// the module itself: the first call does (see Ready), or a background
// warm-up when mc.Warm is set. The warnings name
// every capability the manifest requested that the grants do not give (and
// grants nothing requested); the module loads without them. Errors name the
// file and field at fault. The tools stay usable until Close.
func (h *Host) Load(ctx context.Context, mc ModuleConfig) ([]kernel.Tool, []string, error) {
	m, warnings, err := h.load(ctx, mc)
	if err != nil {
		label := mc.Path
		if mc.Name != "" {
			label = mc.Name + " (" + mc.Path + ")"
		}
		return nil, warnings, fmt.Errorf("load wasm module %s: %w", label, err)
	}
	tools := make([]kernel.Tool, len(m.tools))
	for i, t := range m.tools {
		tools[i] = t
	}
	return tools, warnings, nil
}

func (h *Host) load(ctx context.Context, mc ModuleConfig) (*module, []string, error) {
	if err := mc.validate(); err != nil {
		return nil, nil, err
	}
	mpath := manifestPath(mc.Path)
	mdata, err := os.ReadFile(mpath)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifest (every module needs a %s beside it): %w", ManifestFile, err)
	}
	man, err := h.schema.parseManifest(mpath, mdata)
	if err != nil {
		return nil, nil, err
	}
	if mc.Pool > 0 && man.ABI != ABIReactor {
		return nil, nil, fmt.Errorf("%w: pool: only reactor modules can be pooled, and %s has abi %q", ErrConfig, mpath, man.ABI)
	}
	eff, warnings := intersect(&man.Capabilities, &mc.Grants)
	if need := eff.memoryMB + stackAllowanceMB; !h.budget.fits(need) {
		return nil, warnings, fmt.Errorf("%w: grants.memory_mb: one call needs %d MiB (memory_mb %d + %d MiB of call stack), more than the host's WASM memory budget of %d MiB (limits.wasm_memory_budget_mb): lower memory_mb or raise the budget", ErrConfig, need, eff.memoryMB, stackAllowanceMB, h.budget.mb)
	}

	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, warnings, ErrClosed
	}

	name := mc.Name
	if name == "" {
		name = man.Name
	}
	maxConc := mc.MaxConcurrency
	if maxConc == 0 {
		maxConc = DefaultMaxConcurrency()
	}
	m, err := newModule(ctx, h, moduleSpec{
		name: name, path: mc.Path, sha: mc.SHA256, man: man, eff: eff, pool: mc.Pool, maxConcurrency: maxConc, grants: &mc.Grants,
	})
	if err != nil {
		return nil, warnings, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		m.close(context.WithoutCancel(ctx))
		return nil, warnings, ErrClosed
	}
	h.modules = append(h.modules, m)
	h.mu.Unlock()
	if mc.Warm {
		m.startLoad()
	}
	return m, warnings, nil
}

// Ready loads the module of a tool this package made, if nothing has yet,
// and waits for it: the binary is read, checked against its pins and the
// sandbox's rules, and compiled (or read from the compilation cache). Load
// does none of that, so that a run pays only for the modules it calls;
// Ready reports at once what the first call would. It returns nil for
// other tools.
func Ready(ctx context.Context, t any) error {
	wt, ok := t.(*tool)
	if !ok {
		return nil
	}
	return wt.m.ready(ctx)
}

// compilationCache returns the module's shared compilation cache, creating
// it on first use.
func (h *Host) compilationCache(sha string) (*sharedCache, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if c, ok := h.caches[sha]; ok {
		return c, nil
	}
	dir := moduleCacheDir(h.cacheRoot, sha)
	if err := privfile.Dir(dir, "the WASM compilation cache", warnTo(h.log)); err != nil {
		return nil, err
	}
	wc, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open compilation cache: %w", err)
	}
	c := &sharedCache{cache: wc}
	h.caches[sha] = c
	return c, nil
}

// shrinkPools closes the idle instances of every loaded module's pool,
// for a call that finds the memory budget short.
func (h *Host) shrinkPools() {
	h.mu.Lock()
	modules := slices.Clone(h.modules)
	h.mu.Unlock()
	for _, m := range modules {
		select {
		case <-m.loaded:
			m.pool.shrink()
		default:
		}
	}
}

// enter registers a call; it fails once Close has begun.
func (h *Host) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.calls.Add(1)
	return true
}

func (h *Host) leave() { h.calls.Done() }

// Close cancels the calls in flight, waits for them to return, stops the
// pools and releases every module. Tools of this Host fail with ErrClosed
// afterwards. If ctx ends before the calls return, Close returns ctx's
// error and leaves the modules allocated rather than free memory a guest
// may still be using.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	modules := h.modules
	h.modules = nil
	h.mu.Unlock()

	h.lifeStop()
	for _, m := range modules {
		select {
		case <-m.loaded: // the pool, if any, exists
			m.stopPool()
		default: // loading (Close waits for it below) or never loaded
		}
	}
	idle := make(chan struct{})
	go func() {
		h.calls.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-ctx.Done():
		return fmt.Errorf("close wasm host: calls still running: %w", ctx.Err())
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, m := range modules {
		keep(m.close(context.WithoutCancel(ctx)))
	}
	h.mu.Lock()
	caches := h.caches
	h.caches = nil
	h.mu.Unlock()
	for _, c := range caches {
		keep(c.cache.Close(context.WithoutCancel(ctx)))
	}
	return first
}
