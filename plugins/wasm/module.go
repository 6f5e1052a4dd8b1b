package wasm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/agentkernel/agentkernel/internal/config"
)

// wasiModule is the only import namespace a module may use.
const wasiModule = "wasi_snapshot_preview1"

// The reactor ABI's exports.
const (
	exportAlloc = "agentkernel_alloc" // (size i32) -> (ptr i32)
	exportCall  = "agentkernel_call"  // (ptr i32, len i32) -> (ptr<<32 | len) i64
	exportStart = "_start"
	exportInit  = "_initialize"
	exportWarm  = "agentkernel_warm" // optional: () -> (), run after _initialize
)

// ErrModule marks a module binary the host refuses to run.
var ErrModule = errors.New("unsupported module")

type moduleSpec struct {
	name, path, sha string // sha: the operator's pin, or empty
	man             *manifest
	eff             effective
	pool            int
	maxConcurrency  int
	grants          *Grants
}

// module is a loaded module: its runtime (one per module, because the
// memory cap is a runtime setting), its compiled code and its tools.
//
// Loading is lazy: newModule reads nothing but the manifest and opens the
// granted directories; the binary is read, checked and compiled (or its
// compiled code read from the cache) by the first call, or in the
// background when the operator asks for warm-up, never by a run that does
// not call it. Every call waits for that one compile.
type module struct {
	h    *Host
	name string
	path string
	abi  string
	eff  effective
	spec moduleSpec

	loadOnce sync.Once
	started  atomic.Bool
	loaded   chan struct{} // closed when load has finished
	loadErr  error         // set before loaded is closed

	// Set by load, read only after loaded is closed.
	sha      string
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	pool     *pool
	snap     *snapshotMeta // a pre-initialised image (snapshot.go), or nil

	tools   []*tool
	capDesc string
	slots   chan struct{} // max_concurrency: one token per running call
	health  breaker
}

func newModule(ctx context.Context, h *Host, s moduleSpec) (m *module, err error) {
	m = &module{h: h, name: s.name, path: s.path, abi: s.man.ABI, eff: s.eff, spec: s, loaded: make(chan struct{})}
	defer func() {
		if err != nil {
			m.close(context.WithoutCancel(ctx))
			m = nil
		}
	}()
	for i := range m.eff.mounts {
		mt := &m.eff.mounts[i]
		root, err := os.OpenRoot(mt.host)
		if err != nil {
			idx := slices.IndexFunc(s.grants.FS, func(g FSGrant) bool { return g.Guest == mt.guest })
			return m, fmt.Errorf("%w: grants.fs[%d].host: %v", ErrConfig, idx, err)
		}
		mt.root = root
	}
	if st, err := os.Stat(s.path); err != nil {
		return m, fmt.Errorf("read module: %w", err)
	} else if !st.Mode().IsRegular() {
		return m, fmt.Errorf("read module: %s is not a regular file", s.path)
	}
	m.capDesc = m.eff.String()
	if s.maxConcurrency > 0 {
		m.slots = make(chan struct{}, s.maxConcurrency)
	}
	for i := range s.man.Tools {
		m.tools = append(m.tools, newTool(m, &s.man.Tools[i]))
	}
	return m, nil
}

// startLoad begins loading the module in the background, once.
func (m *module) startLoad() {
	m.loadOnce.Do(func() {
		m.started.Store(true)
		if !m.h.enter() {
			m.loadErr = ErrClosed
			close(m.loaded)
			return
		}
		go func() {
			defer m.h.leave()
			start := time.Now()
			err := m.load(m.h.life)
			if err != nil {
				err = fmt.Errorf("load wasm module %s (%s): %w", m.name, m.path, err)
				m.h.log.Error("loading a WASM module failed", "module", m.name, "error", err)
			} else {
				m.h.log.Debug("WASM module loaded", "module", m.name, "took", time.Since(start))
				if m.abi == ABIReactor {
					m.pool = newPool(m, m.spec.pool)
				}
			}
			m.loadErr = err
			close(m.loaded)
			if err == nil && m.h.life.Err() == nil {
				m.startPool()
			}
		}()
	})
}

// ready loads the module if no one has yet and waits for it, or for ctx.
func (m *module) ready(ctx context.Context) error {
	m.startLoad()
	select {
	case <-m.loaded:
		return m.loadErr
	default:
	}
	select {
	case <-m.loaded:
		return m.loadErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// load reads, checks and compiles the module. It runs once, on the goroutine
// startLoad starts.
func (m *module) load(ctx context.Context) error {
	s := m.spec
	bin, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("read module: %w", err)
	}
	sum := sha256.Sum256(bin)
	sha := hex.EncodeToString(sum[:])
	if s.sha != "" && !config.PinMatches(s.sha, sha) {
		return fmt.Errorf("%w: sha256: %s is pinned but the file's sha256 is %s", ErrConfig, strings.ToLower(s.sha), sha)
	}
	if s.man.SHA256 != "" && !config.PinMatches(s.man.SHA256, sha) {
		return fmt.Errorf("%s: %w: sha256: %s is pinned but %s has sha256 %s", manifestPath(s.path), ErrManifest, s.man.SHA256, s.path, sha)
	}
	m.sha = sha
	h := m.h

	info, err := parseWasm(bin)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrModule, err)
	}
	if info.shared {
		return fmt.Errorf("%w: it needs threads (a shared memory), which the sandbox does not support; build it without threads", ErrModule)
	}
	// wazero's page limit is the whole 32-bit space, so that every grow,
	// however large, reaches cappedAllocator, which enforces the cap and
	// reports it as memory_limit (a lower backstop would refuse a single
	// large grow itself, and the guest would die of "out of memory"
	// instead). The allocator reserves the cap, never what wazero asks.
	capPages := uint32(m.eff.memoryMB) * 16 // 64 KiB pages
	const pages = 65536
	if info.minPages > capPages {
		return fmt.Errorf("%w: its memory starts at %d MiB, more than memory_mb %d", ErrModule, (info.minPages+15)/16, m.eff.memoryMB)
	}
	if err := checkImports(info, wasiFunctions()); err != nil {
		return err
	}
	if err := checkExports(info, m.abi); err != nil {
		return err
	}
	if m.snap, err = readSnapshotMeta(bin); err != nil {
		return err
	}
	if err := m.checkSnapshot(); err != nil {
		return err
	}
	bin, _, err = instrument(bin, info)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrModule, err)
	}

	cc, err := h.compilationCache(sha)
	if err != nil {
		return err
	}
	mc, err := openModuleCache(h.cacheRoot, sha, h.cacheKey, h.log)
	if err != nil {
		return err
	}
	defer mc.unlock()
	known, removed, first, err := cc.verifyOnce(mc)
	if err != nil {
		return err
	}
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(cc.cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(pages).
		WithMemoryCapacityFromMax(true)
	m.runtime = wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.runtime); err != nil {
		return fmt.Errorf("instantiate WASI: %w", err)
	}
	// wazero compiles functions on one goroutine unless told otherwise.
	cctx := experimental.WithCompilationWorkers(ctx, runtime.GOMAXPROCS(0))
	if h.compiling != nil {
		defer h.compiling(s.name)()
	}
	m.compiled, err = m.runtime.CompileModule(cctx, bin)
	if err != nil {
		// wazero fails on a cached entry it cannot read (verify's MAC
		// makes that a cache that changed under the lock, or a wazero
		// that cannot read its own entry): drop the module's entries and
		// compile once more.
		if ctx.Err() != nil {
			return fmt.Errorf("%w: compile: %v", ErrModule, err)
		}
		n, derr := mc.dropAll(known, err)
		if derr != nil || n == 0 {
			return fmt.Errorf("%w: compile: %v", ErrModule, err)
		}
		removed += n
		first = true
		if m.compiled, err = m.runtime.CompileModule(cctx, bin); err != nil {
			return fmt.Errorf("%w: compile: %v", ErrModule, err)
		}
	}
	if first {
		if err := mc.record(known, removed); err != nil {
			h.log.Warn("could not record the compilation cache's MACs", "module", s.name, "error", err)
		}
	}
	return nil
}

// wasiFunctions are the functions of wazero's WASI preview1, read once
// from a throwaway interpreter runtime (no machine code is compiled).
var wasiFunctions = sync.OnceValue(func() map[string]api.FunctionDefinition {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	c, err := wasi_snapshot_preview1.NewBuilder(r).Compile(ctx)
	if err != nil {
		panic("wazero cannot compile its own WASI module: " + err.Error())
	}
	return c.ExportedFunctions()
})

// checkImports refuses imports other than the WASI functions wazero
// provides, with their exact signatures.
func checkImports(info *wasmInfo, wasi map[string]api.FunctionDefinition) error {
	for _, im := range info.imports {
		what := im.module + "." + im.name
		if im.module == "wasi" && im.name == "thread-spawn" {
			return fmt.Errorf("%w: it imports %s: it needs threads, which the sandbox does not support", ErrModule, what)
		}
		if im.module != wasiModule {
			return fmt.Errorf("%w: unknown import %s: only %s functions are provided", ErrModule, what, wasiModule)
		}
		if im.kind != externFunc {
			return fmt.Errorf("%w: unknown import %s: only %s functions are provided, not a %s", ErrModule, what, wasiModule, externName(im.kind))
		}
		def, ok := wasi[im.name]
		if !ok {
			return fmt.Errorf("%w: unknown import %s: %s has no function %q", ErrModule, what, wasiModule, im.name)
		}
		if int(im.typeIndex) >= len(info.types) {
			return fmt.Errorf("%w: import %s has type index %d out of range", ErrModule, what, im.typeIndex)
		}
		want := funcType{params: valueTypes(def.ParamTypes()), results: valueTypes(def.ResultTypes())}
		if got := info.types[im.typeIndex]; !slices.Equal(got.params, want.params) || !slices.Equal(got.results, want.results) {
			return fmt.Errorf("%w: import %s has signature %s, want %s", ErrModule, what, got, want)
		}
	}
	return nil
}

func valueTypes(ts []api.ValueType) []byte {
	out := make([]byte, len(ts))
	for i, t := range ts {
		out[i] = byte(t)
	}
	return out
}

func externName(k byte) string {
	switch k {
	case externTable:
		return "table"
	case externMemory:
		return "memory"
	case externGlobal:
		return "global"
	case externTag:
		return "tag"
	}
	return "function"
}

// checkExports checks the entry points of the module's ABI.
func checkExports(info *wasmInfo, abi string) error {
	want := func(name string, sig funcType, why string) error {
		got, ok := info.exportedFunc(name)
		if !ok {
			return fmt.Errorf("%w: abi %q needs an exported function %s %s (%s)", ErrModule, abi, name, sig, why)
		}
		if !slices.Equal(got.params, sig.params) || !slices.Equal(got.results, sig.results) {
			return fmt.Errorf("%w: export %s has signature %s, abi %q needs %s", ErrModule, name, got, abi, sig)
		}
		return nil
	}
	i32, i64 := byte(api.ValueTypeI32), byte(api.ValueTypeI64)
	switch abi {
	case ABIReactor:
		if e, ok := info.exports["memory"]; !ok || e.kind != externMemory {
			return fmt.Errorf("%w: abi %q needs the module to export its memory as \"memory\"", ErrModule, abi)
		}
		if _, ok := info.exports[exportStart]; ok {
			return fmt.Errorf("%w: abi %q needs a reactor, but the module exports %s (a command); build it with -buildmode=c-shared", ErrModule, abi, exportStart)
		}
		if err := want(exportAlloc, funcType{params: []byte{i32}, results: []byte{i32}}, "the host asks it for room for the request"); err != nil {
			return err
		}
		if _, ok := info.exports[exportWarm]; ok {
			if err := want(exportWarm, funcType{}, "optional; the host calls it before the instance waits for its call"); err != nil {
				return err
			}
		}
		return want(exportCall, funcType{params: []byte{i32, i32}, results: []byte{i64}}, "the host calls it with the request")
	default:
		return want(exportStart, funcType{}, "a WASI command; build it as a program, not with -buildmode=c-shared")
	}
}

// instance is one instantiated module serving at most one call.
type instance struct {
	mod api.Module
	io  *instanceIO
	mem *mappedMemory // nil unless the memory is a mapping

	alloc, call api.Function // reactor entry points, resolved ahead of the call

	charge charge // what it holds of the host's memory budget
	// overflowed: its call died of a stack overflow, so it leaves the
	// largest garbage a guest can (see collectStacks).
	overflowed bool
}

func (in *instance) close() {
	// The context only reaches close notifiers, which modules cannot set.
	_ = in.mod.Close(context.Background())
	if in.overflowed {
		in.mod, in.alloc, in.call = nil, nil, nil
		collectStacks()
	}
	in.charge.release()
}

// moduleConfig is the sandbox of one instance: exactly the effective
// capabilities, nothing else.
func (m *module) moduleConfig(x *instanceIO, stdin io.Reader, args []string) wazero.ModuleConfig {
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(args...).
		WithStdin(stdin).
		WithStdout(stdoutWriter{x}).
		WithStderr(stderrWriter{x})
	for _, v := range m.eff.env {
		cfg = cfg.WithEnv(v.name, v.value)
	}
	fsc := wazero.NewFSConfig()
	for _, mt := range m.eff.mounts {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(newRootFS(mt.root, mt.readOnly), mt.guest)
	}
	cfg = cfg.WithFSConfig(fsc)
	if m.eff.clock {
		cfg = cfg.WithSysWalltime().WithSysNanotime().WithNanosleep(x.sleep)
	}
	if m.snap != nil {
		cfg = cfg.WithNanotime(snapshotNanotime(m.snap.Nanotime, m.eff.clock), 1)
	}
	if m.eff.random {
		cfg = cfg.WithRandSource(rand.Reader)
	}
	switch {
	case m.snap != nil:
		// A snapshot starts initialised: nothing runs before its call.
		cfg = cfg.WithStartFunctions()
	case m.abi == ABIReactor:
		cfg = cfg.WithStartFunctions(exportInit)
	}
	return cfg
}

// reserve takes the share of the host's memory budget that an instance
// serving one call holds (callCharge), waiting at most until ctx is done.
// When the budget is short it first closes the idle instances of every
// pool, which hold the same share each, so that a pool never starves calls.
func (m *module) reserve(ctx context.Context) (charge, error) {
	mb := m.callCharge()
	release, ok := m.h.budget.tryAcquire(mb)
	if !ok {
		m.h.shrinkPools()
		var err error
		if release, err = m.h.budget.acquire(ctx, mb); err != nil {
			return charge{}, m.h.budget.waitError(ctx, mb)
		}
	}
	return charge{releases: []func(){release}}, nil
}

// callCharge is what one instance counts against the host's budget, in
// MiB: its linear memory's cap and the native stacks of a call.
func (m *module) callCharge() int { return m.eff.memoryMB + stackAllowanceMB }

// instantiate creates an instance holding ch; for a command module this
// runs the whole program. The instance is returned even when the program
// failed, so its output can be read; the caller closes it (which gives ch
// back). Without an instance, ch is given back here.
func (m *module) instantiate(ctx context.Context, ch charge, x *instanceIO, stdin io.Reader, args []string) (*instance, error) {
	limit := uint64(m.eff.memoryMB) << 20
	var mapped *mappedMemory
	ctx = experimental.WithMemoryAllocator(ctx, cappedAllocator{limit: limit, mapped: &mapped, onLimit: func() {
		x.fail(fmt.Errorf("%w: the guest asked for more than %d MiB (memory_mb)", ErrMemoryLimit, m.eff.memoryMB))
	}})
	mod, err := m.runtime.InstantiateModule(ctx, m.compiled, m.moduleConfig(x, stdin, args))
	if mod == nil {
		ch.release()
		return nil, err
	}
	return &instance{mod: mod, io: x, mem: mapped, charge: ch}, err
}

// newReactorInstance instantiates and initialises a reactor instance that
// holds ch, bounded by the module's timeout.
func (m *module) newReactorInstance(ctx context.Context, ch charge) (*instance, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, m.eff.timeout, fmt.Errorf("initialising module %s took longer than %s", m.name, m.eff.timeout))
	defer cancel()
	ictx, icancel := context.WithCancelCause(ctx)
	defer icancel(nil)
	x := newInstanceIO(m.eff.maxOutput)
	x.attach(ictx, icancel)
	in, err := m.instantiate(ictx, ch, x, strings.NewReader(""), []string{m.name})
	if err == nil {
		in.alloc, in.call = in.mod.ExportedFunction(exportAlloc), in.mod.ExportedFunction(exportCall)
		if warm := in.mod.ExportedFunction(exportWarm); warm != nil {
			_, err = warm.Call(ictx)
		}
	}
	if err == nil && in.mem != nil {
		in.mem.prefault(uint64(in.mod.Memory().Size()))
	}
	if err != nil {
		if in != nil {
			in.overflowed = stackOverflow(err)
			in.close()
		}
		return nil, describeExit(ictx, err, x, "initialise")
	}
	return in, nil
}

func (m *module) startPool() {
	if m.pool != nil {
		m.pool.start()
	}
}

func (m *module) stopPool() {
	if m.pool != nil {
		m.pool.stop()
	}
}

// close releases everything the module holds. The Host calls it only when
// no call is running.
func (m *module) close(ctx context.Context) error {
	m.stopPool()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if m.runtime != nil {
		keep(m.runtime.Close(ctx))
	}
	for _, mt := range m.eff.mounts {
		if mt.root != nil {
			keep(mt.root.Close())
		}
	}
	return first
}

// timeoutOf is the deadline of one call: the module's timeout.
func (m *module) timeoutOf() time.Duration { return m.eff.timeout }
