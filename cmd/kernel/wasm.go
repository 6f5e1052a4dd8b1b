package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/progress"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/wasm"
)

func (cfg *Config) wasmConfigs() ([]wasm.ModuleConfig, error) {
	var mcs []wasm.ModuleConfig
	if err := cfg.section("tools.wasm", &cfg.Tools.WASM, &mcs); err != nil {
		return nil, err
	}
	return mcs, nil
}

// loadWASM reads every configured module's manifest and registers its
// tools with the capabilities granted to them; a module is compiled (or
// read from the cache) on its first call, or in the background when its
// entry says warm: true. A capability a manifest requests and the config
// does not grant is reported, not given.
func (a *app) loadWASM(ctx context.Context) error {
	mcs, err := a.cfg.wasmConfigs()
	if err != nil || len(mcs) == 0 {
		return err
	}
	host, err := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: filepath.Join(cacheDir(), "wasm"), Logger: a.log.Named("wasm"), MemoryBudgetMB: a.cfg.Limits.WASMMemoryBudgetMB,
		MaxRunning: a.cfg.Limits.WASMMaxRunning, Compiling: a.compiling})
	if err != nil {
		return fmt.Errorf("start the WASM host: %w", err)
	}
	a.wasm = host
	a.closers = append(a.closers, func() error { return host.Close(context.WithoutCancel(ctx)) })
	for i, mc := range mcs {
		tools, warnings, err := host.Load(ctx, mc)
		if err != nil {
			return fmt.Errorf("%s: tools.wasm[%d] (%s): %w", a.cfg.source(), i, mc.Path, err)
		}
		for _, w := range warnings {
			a.warnings = append(a.warnings, kernel.Notice{Source: "wasm", Level: "warn", Text: w})
		}
		if err := a.tools.Register(tools...); err != nil {
			return fmt.Errorf("%s: tools.wasm[%d] (%s): %w", a.cfg.source(), i, mc.Path, err)
		}
	}
	return nil
}

// capabilities describes what a tool was granted, for `kernel tools`.
func capabilities(t kernel.Tool) string {
	if s, ok := wasm.Capabilities(t); ok {
		if h, _ := wasm.Health(t); h != "" {
			s += " " + strings.ToUpper(h[:1]) + h[1:]
		}
		return s
	}
	return "-"
}

// compiling shows a status line on a terminal while a WASM module
// compiles for more than two seconds: the first use of a module (or of a
// new kernel version) compiles it, which takes a minute or more on a small
// machine; later runs load it from the cache at once.
func (a *app) compiling(module string) func() {
	l := progress.Start(a.stderr, statusAfter, func(el time.Duration) string {
		return fmt.Sprintf("compiling WASM module %s for this machine, once (later runs load it from the cache) · %s", module, progress.Seconds(el))
	})
	return l.Stop
}
