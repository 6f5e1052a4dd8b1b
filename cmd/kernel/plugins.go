package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
)

func (cfg *Config) pluginConfigs() ([]subprocess.PluginConfig, error) {
	var pcs []subprocess.PluginConfig
	if err := cfg.section("tools.plugins", &cfg.Tools.Plugins, &pcs); err != nil {
		return nil, err
	}
	return pcs, nil
}

// cacheDir is where the kernel keeps what it can rebuild: plugin tool lists
// and compiled WASM ($XDG_CACHE_HOME/agentkernel).
func cacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "agentkernel")
}

// loadPlugins starts the plugin host and registers every configured
// plugin's tools (lazily started: a cached tool list needs no process).
func (a *app) loadPlugins(ctx context.Context) error {
	pcs, err := a.cfg.pluginConfigs()
	if err != nil || len(pcs) == 0 {
		return err
	}
	a.plugins = subprocess.NewHost(subprocess.HostConfig{Logger: a.log.Named("plugins"), StateDir: cacheDir(),
		OnNotice: func(n kernel.Notice) { a.emit(n) }, AllowMissing: a.cfg.Sandbox.AllowMissing, OnSpans: a.onSpans()})
	a.closers = append(a.closers, a.plugins.Close)
	for i, pc := range pcs {
		tools, err := a.plugins.Load(ctx, pc)
		if err != nil {
			return fmt.Errorf("%s: tools.plugins[%d] (%s): %w", a.cfg.source(), i, pc.Name, err)
		}
		if err := a.tools.Register(tools...); err != nil {
			return fmt.Errorf("%s: tools.plugins[%d] (%s): %w", a.cfg.source(), i, pc.Name, err)
		}
	}
	return nil
}

// pluginsGroup is `kernel plugins`.
var pluginsGroup = group{
	name:   "plugins",
	footer: "See docs/plugins.md.",
	subs: []subcmd{
		{name: "verify", summary: "check every configured plugin: its sha256 pin, that it\nstarts and completes the handshake, and its tools", flags: noFlags(pluginsVerify)},
		{name: "lock", synopsis: "DIR", summary: "lock an interpreted plugin's directory: write\nDIR/agentkernel.lock (the sha256 of every file in it)\nand print the sha256 that pins it in kernel.yaml",
			args: "DIR", need: 1, needs: "the directory that holds the plugin's script", flags: noFlags(pluginsLock)},
	},
}

// pluginsVerify is `kernel plugins verify`.
func pluginsVerify(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	pcs, err := cfg.pluginConfigs()
	if err != nil {
		return err
	}
	if len(pcs) == 0 {
		fmt.Fprintf(env.stderr, "%s configures no plugins (tools.plugins)\n", cfg.source())
		return nil
	}
	host := subprocess.NewHost(subprocess.HostConfig{Logger: newLogger(env.stderr).Named("plugins"), StateDir: cacheDir()})
	defer host.Close()
	failed := 0
	for _, pc := range pcs {
		rep, err := host.Verify(ctx, pc)
		if err != nil {
			failed++
			fmt.Fprintf(env.stdout, "FAIL %s: %v\n", pc.Name, err)
			continue
		}
		fmt.Fprintf(env.stdout, "ok   %s  %s  sha256:%s  started in %s  sdk %s\n", rep.Plugin, rep.Path, rep.SHA256, rep.StartTime.Round(time.Millisecond), rep.SDKVersion)
		for _, t := range rep.Tools {
			fmt.Fprintf(env.stdout, "       %-24s %-14s %s\n", t.Name, t.Tier, clip(firstLine(t.Description), 60))
		}
	}
	if failed > 0 {
		return exitError{code: 1, msg: fmt.Sprintf("%d of %d plugins failed verification", failed, len(pcs))}
	}
	return nil
}

// pluginsLock is `kernel plugins lock DIR`.
func pluginsLock(ctx context.Context, _ *commonFlags, env *cliEnv, pos []string) error {
	if len(pos) != 1 {
		return usageError("kernel plugins lock takes one directory: the one that holds the plugin's script")
	}
	sum, n, err := subprocess.WriteLock(pos[0])
	if err != nil {
		return err
	}
	files := "files"
	if n == 1 {
		files = "file"
	}
	fmt.Fprintf(env.stdout, "locked %d %s of %s in %s; pin it in the plugin's entry in kernel.yaml:\n    sha256: %s\n",
		n, files, pos[0], filepath.Join(pos[0], subprocess.LockFile), sum)
	return nil
}
