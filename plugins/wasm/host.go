package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"

	"github.com/agentkernel/agentkernel/kernel"
)

// Host loads WASM tool modules and runs their calls. It owns every module's
// runtime, compiled code, pool goroutine and mounted directory until Close.
// A Host is safe for concurrent use.
type Host struct {
	log      hclog.Logger
	cacheDir string
	schema   *manifestSchema

	// life is cancelled by Close; every call is cancelled with it.
	life     context.Context
	lifeStop context.CancelFunc

	mu      sync.Mutex
	closed  bool
	modules []*module
	caches  map[string]*sharedCache // by module sha256
	calls   sync.WaitGroup          // calls in flight
}

// NewHost prepares a Host: it creates the cache directory (0700) and
// compiles the manifest schema. ctx's values (not its cancellation) are kept
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
	if err := ensurePrivateDir(dir); err != nil {
		return nil, err
	}
	schema, err := compileManifestSchema()
	if err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	return &Host{log: log, cacheDir: dir, schema: schema, life: life, lifeStop: stop, caches: map[string]*sharedCache{}}, nil
}

// CacheDir is the directory compiled modules are kept in.
func (h *Host) CacheDir() string { return h.cacheDir }

// Load reads a module and its manifest, checks them, compiles the module
// (from the cache when it can) and returns its tools. The warnings name
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
	bin, err := os.ReadFile(mc.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("read module: %w", err)
	}
	sum := sha256.Sum256(bin)
	sha := hex.EncodeToString(sum[:])
	if mc.SHA256 != "" && !strings.EqualFold(mc.SHA256, sha) {
		return nil, nil, fmt.Errorf("%w: sha256: %s is pinned but the file's sha256 is %s", ErrConfig, strings.ToLower(mc.SHA256), sha)
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
	if man.SHA256 != "" && man.SHA256 != sha {
		return nil, nil, fmt.Errorf("%s: %w: sha256: %s is pinned but %s has sha256 %s", mpath, ErrManifest, man.SHA256, mc.Path, sha)
	}
	if mc.Pool > 0 && man.ABI != ABIReactor {
		return nil, nil, fmt.Errorf("%w: pool: only reactor modules can be pooled, and %s has abi %q", ErrConfig, mpath, man.ABI)
	}
	eff, warnings := intersect(&man.Capabilities, &mc.Grants)

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
	m, err := newModule(ctx, h, moduleSpec{
		name: name, path: mc.Path, sha: sha, bin: bin, man: man, eff: eff, pool: mc.Pool, grants: &mc.Grants,
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
	m.startPool()
	return m, warnings, nil
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
	dir := moduleCacheDir(h.cacheDir, sha)
	if err := ensurePrivateDir(dir); err != nil {
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
		m.stopPool()
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
