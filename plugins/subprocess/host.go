package subprocess

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/backoff"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/proc"
)

// HostConfig configures a Host. The zero value is usable: no logs, no
// Describe cache, verified copies and sockets under os.TempDir().
type HostConfig struct {
	// Logger receives the host's logs and each plugin's output, under the
	// plugin's name. Nil discards them.
	Logger hclog.Logger
	// StateDir holds the Describe cache (StateDir/plugins/describe, 0700),
	// which lets Load register a lazy plugin's tools without starting it,
	// and the store of verified binaries (StateDir/plugins/bin, 0700;
	// binstore.go), which lets a later host run a pinned binary verified
	// once without copying and hashing it again. Empty means neither: Load
	// starts every plugin to ask for its tools, and verifies every binary.
	StateDir string
	// RunDir is where the host creates its private 0700 directory for the
	// verified copies of the binaries and the plugins' sockets; it must
	// allow executing files and be short enough for unix socket paths.
	// Empty means os.TempDir(). The directory is removed by Close.
	RunDir string
	// OnNotice, if set, is told when a plugin's circuit breaker opens or
	// closes; the CLI turns these into kernel.Notice events. It must not
	// block and may be called from any goroutine.
	OnNotice func(kernel.Notice)
	// OnSpans, if set, receives the spans a plugin recorded for a call
	// (OTLP TracesData, protobuf-encoded; see pluginpb.Result.spans), with
	// the call's context: telemetry.ImportSpans. A plugin sends spans only
	// when the call's context carries a sampled trace, which the host
	// passes to the plugin as W3C traceparent in the call's gRPC metadata.
	OnSpans func(ctx context.Context, plugin string, spans []byte)
	// AllowMissing is added to every plugin's sandbox grant: the layers
	// the operator accepts to run without (kernel.yaml's
	// sandbox.allow_missing).
	AllowMissing []sandbox.Layer
}

// Host runs subprocess plugins: it verifies each binary against its pin,
// executes a private copy, supervises the process and exposes its tools as
// kernel.Tools. Safe for concurrent use. Close it when the kernel exits.
type Host struct {
	cfg    HostConfig
	log    hclog.Logger
	ctx    context.Context // cancelled by Close, to cut backoff waits short
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	dir     string // the private directory; created on first use
	spawner *proc.Spawner
	plugins map[string]*supervisor
	ops     sync.WaitGroup // Load, Verify and process starts in progress
	wg      sync.WaitGroup // instance watchers

	// The store of verified copies (binStore), opened once; storeHits
	// counts the starts it spared a verification (tests read it).
	storeOnce sync.Once
	store     *binStore
	storeHits atomic.Int64

	// The host's TLS key and certificate (clientTLS), made once.
	tlsOnce sync.Once
	tlsCert tls.Certificate
	tlsPEM  string
	tlsErr  error
}

// NewHost returns a Host. It starts nothing until Load or Verify.
func NewHost(cfg HostConfig) *Host {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Host{cfg: cfg, log: log, ctx: ctx, cancel: cancel, plugins: map[string]*supervisor{}}
}

// begin registers an operation that may start processes; done must be
// called when it ends. It fails once the host is closed, and creates the
// private directory and the spawner on first use.
func (h *Host) begin() (done func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.dir == "" {
		d, err := privateDir(h.cfg.RunDir)
		if err != nil {
			return nil, err
		}
		h.dir = d
		h.spawner = proc.NewSpawner()
	}
	h.ops.Add(1)
	return h.ops.Done, nil
}

// Load verifies cfg's binary, makes its private copy and returns its tools,
// named "plugin.tool" with Source "subprocess:<plugin>". A lazy plugin
// whose tools are in the Describe cache is not started; otherwise Load
// starts it (and leaves it running). The binary must match cfg.SHA256: a
// missing or wrong pin is a *HashError that carries the actual sha256.
func (h *Host) Load(ctx context.Context, cfg PluginConfig) ([]kernel.Tool, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	cfg, warn, err := EffectiveConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, w := range warn {
		h.log.Warn("sandbox request not granted", "plugin", cfg.Name, "detail", w)
		h.notice("warn", cfg.Name, w)
	}
	done, err := h.begin()
	if err != nil {
		return nil, err
	}
	defer done()
	h.mu.Lock()
	_, dup := h.plugins[cfg.Name]
	h.mu.Unlock()
	if dup {
		return nil, pluginError(cfg.Name, "name", ErrDuplicatePlugin)
	}
	exe, sum, stored, err := h.verified(cfg, false)
	if err != nil {
		return nil, err
	}
	s := &supervisor{h: h, cfg: cfg, exe: exe, stored: stored, sum: sum, log: h.log.Named(cfg.Name),
		crashes: backoff.Restarts(cfg.Restart.MaxCrashes, cfg.Restart.Backoff.D(), cfg.Restart.Cooldown.D())}
	specs, cached := h.readCache(cfg, sum)
	if cached {
		s.specs = toMap(specs)
	}
	if !cached || cfg.Start == StartEager {
		inst, err := s.acquire(ctx)
		if err != nil {
			s.close()
			if !stored {
				_ = os.RemoveAll(exe)
			}
			return nil, err
		}
		specs = inst.specs
		s.mu.Lock()
		s.specs = toMap(specs)
		s.mu.Unlock()
	}
	h.mu.Lock()
	if _, dup := h.plugins[cfg.Name]; dup || h.closed {
		h.mu.Unlock()
		s.close()
		if dup {
			return nil, pluginError(cfg.Name, "name", ErrDuplicatePlugin)
		}
		return nil, ErrClosed
	}
	h.plugins[cfg.Name] = s
	h.mu.Unlock()

	tools := make([]kernel.Tool, len(specs))
	for i, sp := range specs {
		tools[i] = &pluginTool{sup: s, remote: sp, spec: sp.kernelSpec(cfg.Name, cfg.Timeout.D()), timeout: cfg.Timeout.D()}
	}
	s.log.Debug("plugin loaded", "sha256", sum, "tools", len(tools), "cached", cached, "running", !cached || cfg.Start == StartEager)
	return tools, nil
}

func toMap(specs []toolSpec) map[string]toolSpec {
	m := make(map[string]toolSpec, len(specs))
	for _, s := range specs {
		m[s.Name] = s
	}
	return m
}

// VerifyReport is what Verify found out about a plugin.
type VerifyReport struct {
	Plugin string
	Path   string
	// SHA256 is the binary's actual sha256 (set even when the pin is wrong).
	SHA256     string
	SDKVersion string
	// Tools are the plugin's tools, as the kernel would register them.
	Tools []kernel.ToolSpec
	// StartTime is how long verifying, starting and describing took.
	StartTime time.Duration
}

// Verify checks cfg's pin, starts the plugin (handshake and Describe),
// stops it, and reports its tools. It refreshes the Describe cache. It does
// not register anything; use it for `kernel plugins verify`.
func (h *Host) Verify(ctx context.Context, cfg PluginConfig) (VerifyReport, error) {
	rep := VerifyReport{Plugin: cfg.Name, Path: cfg.Path}
	cfg, err := cfg.normalize()
	if err != nil {
		return rep, err
	}
	done, err := h.begin()
	if err != nil {
		return rep, err
	}
	defer done()
	start := time.Now()
	exe, sum, stored, err := h.verified(cfg, true)
	rep.SHA256 = sum
	if err != nil {
		return rep, err
	}
	if !stored {
		defer os.RemoveAll(exe)
	}
	inst, err := startInstance(ctx, h, cfg, exe)
	if err != nil {
		return rep, err
	}
	rep.StartTime = time.Since(start)
	rep.SDKVersion = inst.sdkVersion
	for _, sp := range inst.specs {
		rep.Tools = append(rep.Tools, sp.kernelSpec(cfg.Name, cfg.Timeout.D()))
	}
	h.writeCache(cfg, sum, inst.specs, inst.sdkVersion)
	inst.markStopped("verified")
	t := time.AfterFunc(stopGrace, func() { inst.runner.Kill(context.Background()) })
	inst.cleanup.Do(inst.client.Kill)
	t.Stop()
	<-inst.runner.done()
	return rep, nil
}

// Close stops every plugin (gracefully, then by killing its process
// group), waits for the host's goroutines and removes the private
// directory. Calls in flight fail; later calls and loads return ErrClosed.
// Close is idempotent.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	sups := make([]*supervisor, 0, len(h.plugins))
	for _, s := range h.plugins {
		sups = append(sups, s)
	}
	h.mu.Unlock()
	h.cancel()

	var wg sync.WaitGroup
	for _, s := range sups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.close()
		}()
	}
	wg.Wait()
	h.ops.Wait()
	h.wg.Wait()
	if h.spawner != nil {
		h.spawner.Stop()
	}
	if h.dir != "" {
		if err := os.RemoveAll(h.dir); err != nil {
			return fmt.Errorf("remove private plugin directory: %w", err)
		}
	}
	return nil
}

func (h *Host) notice(level, plugin, text string) {
	if h.cfg.OnNotice != nil {
		h.cfg.OnNotice(kernel.Notice{Source: "subprocess:" + plugin, Level: level, Text: text})
	}
}

// PluginStatus is the state of one loaded plugin.
type PluginStatus struct {
	Name   string
	SHA256 string
	// PID is the running process's id, or 0 when it is not running.
	PID int
	// Crashes counts consecutive crashes; Unavailable is set while the
	// circuit breaker is open, until OpenUntil.
	Crashes     int
	Unavailable bool
	OpenUntil   time.Time
}

// Status reports the state of every loaded plugin, sorted by name.
func (h *Host) Status() []PluginStatus {
	h.mu.Lock()
	sups := make([]*supervisor, 0, len(h.plugins))
	for _, s := range h.plugins {
		sups = append(sups, s)
	}
	h.mu.Unlock()
	sort.Slice(sups, func(i, j int) bool { return sups[i].cfg.Name < sups[j].cfg.Name })
	out := make([]PluginStatus, len(sups))
	now := time.Now()
	for i, s := range sups {
		s.mu.Lock()
		st := PluginStatus{Name: s.cfg.Name, SHA256: s.sum, Crashes: s.crashes.Failures()}
		if s.inst != nil {
			st.PID = s.inst.runner.pid
		}
		if s.crashes.IsOpen(now) {
			st.Unavailable, st.OpenUntil = true, s.crashes.Until()
		}
		s.mu.Unlock()
		out[i] = st
	}
	return out
}
