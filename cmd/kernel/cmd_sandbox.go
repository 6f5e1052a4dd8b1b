package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/plugins/mcp"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
)

// SandboxConfig is kernel.yaml's sandbox section.
type SandboxConfig struct {
	// AllowMissing names the layers every native tool may run without
	// where this machine lacks them: an explicit acceptance of that risk.
	AllowMissing []sandbox.Layer `yaml:"allow_missing"`
	// Prestart is how many confined launchers are kept ready per grant for
	// run_command and command hooks (nil: sandbox.DefaultPrestart; 0: none,
	// every command starts cold).
	Prestart *int `yaml:"prestart"`
}

// applyPrestart sets the launcher pool's size and, when run_command is
// on, makes its first launcher ready in the background, so the first
// command does not pay a cold start either. The returned func, for the
// app's closers, stops that and discards the ready launchers (they would
// die with the process anyway; an in-process caller such as a test would
// otherwise keep them until their idle timeout).
func (cfg *Config) applyPrestart(ctx context.Context) func() error {
	n := sandbox.DefaultPrestart
	if cfg.Sandbox.Prestart != nil {
		n = *cfg.Sandbox.Prestart
	}
	sandbox.SetPrestart(n)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	if en := cfg.Tools.Builtin.Enable; n == 0 || (en != nil && !slices.Contains(en, builtin.NameRunCommand)) {
		close(done)
	} else {
		g := builtin.CommandGrant(cfg.path(cfg.Workspace), cfg.Tools.Builtin)
		g.AllowMissing = append(g.AllowMissing, cfg.Sandbox.AllowMissing...)
		go func() {
			defer close(done)
			_ = sandbox.WarmUp(ctx, g) // a failure shows on the first command
		}()
	}
	return func() error {
		cancel()
		<-done
		sandbox.ClosePrestarted()
		return nil
	}
}

// hooksOptions are the hook chain's options: paths against the config's
// directory, the workspace readable by command hooks, the accepted risks.
func (cfg *Config) hooksOptions() hooks.Options {
	return hooks.Options{Dir: cfg.dir, Workspace: cfg.path(cfg.Workspace), AllowMissing: cfg.Sandbox.AllowMissing, Known: &heldSecrets}
}

// sandboxGroup is `kernel sandbox`.
var sandboxGroup = group{
	name: "sandbox",
	footer: `A tool whose grant needs a missing layer does not run unless
sandbox.allow_missing names the layer. See docs/sandbox.md.`,
	subs: []subcmd{
		{name: "check", synopsis: "[--json]", summary: "which confinement layers hold on this machine (namespaces, Landlock,\nprocess limit) and the grant each native tool runs under: run_command,\nevery subprocess plugin, every MCP stdio server and every command hook",
			flags: sandboxCheck},
	},
}

// sandboxToolReport is one native tool in `kernel sandbox check`.
type sandboxToolReport struct {
	Tool  string `json:"tool"`
	Grant string `json:"grant"`
	// Runs is false when a layer the grant needs is missing here; Error
	// says which and how to accept the risk.
	Runs  bool   `json:"runs"`
	Error string `json:"error,omitempty"`
}

func sandboxCheck(fs *flag.FlagSet) subRun {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
		cfg, err := cf.load()
		if err != nil {
			return err
		}
		return writeSandboxCheck(env, cfg, *asJSON)
	}
}

// writeSandboxCheck prints what `kernel sandbox check` reports.
func writeSandboxCheck(env *cliEnv, cfg *Config, asJSON bool) error {
	rep := sandbox.Check()
	var tools []sandboxToolReport
	add := func(name string, g sandbox.Grant) {
		g.AllowMissing = append(g.AllowMissing, cfg.Sandbox.AllowMissing...)
		r := sandboxToolReport{Tool: name, Grant: g.Describe(), Runs: true}
		if err := rep.Missing(g); err != nil {
			r.Runs, r.Error = false, err.Error()
		}
		tools = append(tools, r)
	}
	b := cfg.Tools.Builtin
	add("run_command", builtin.CommandGrant(cfg.path(cfg.Workspace), b))
	pcs, err := cfg.pluginConfigs()
	if err != nil {
		return err
	}
	for _, pc := range pcs {
		if eff, _, err := subprocess.EffectiveConfig(pc); err == nil {
			pc = eff // requested ∩ granted
		}
		add("plugin "+pc.Name, subprocess.PluginGrant(pc, "<private copy of "+filepath.Base(pc.Path)+">", "<go-plugin socket dir>"))
	}
	scs, err := cfg.mcpConfigs()
	if err != nil {
		return err
	}
	for _, sc := range scs {
		if len(sc.Command) == 0 {
			continue // an HTTP server runs no process here
		}
		if n, err := sc.Normalize(cfg.path(cfg.Workspace)); err == nil {
			sc = n // {workspace} expanded: the files its command names are in the grant
		}
		g, err := mcp.StdioGrant(sc, nil)
		if err != nil {
			return err
		}
		add("mcp server "+sc.Name, g)
	}
	hc, err := cfg.hooksConfig()
	if err != nil {
		return err
	}
	for _, r := range hc.Rules {
		if r.Command != nil && len(r.Command.Argv) > 0 {
			add("hook "+r.Name, hooks.HookGrant(r.Command, cfg.hooksOptions(), r.Command.Argv[0]))
		}
	}
	if asJSON {
		e := json.NewEncoder(env.stdout)
		e.SetIndent("", "  ")
		return e.Encode(struct {
			Layers       []sandbox.LayerStatus `json:"layers"`
			LandlockABI  int                   `json:"landlock_abi"`
			Root         bool                  `json:"root"`
			Launcher     string                `json:"launcher"`
			Cgroups      sandbox.CgroupReport  `json:"cgroups"`
			AllowMissing []sandbox.Layer       `json:"allow_missing"`
			Tools        []sandboxToolReport   `json:"tools"`
		}{rep.Layers, rep.LandlockABI, rep.Root, rep.Launcher, rep.Cgroups, cfg.Sandbox.AllowMissing, tools})
	}
	fmt.Fprintln(env.stdout, "layers on this machine:")
	for _, l := range rep.Layers {
		mark := "ok     "
		if !l.Active {
			mark = "MISSING"
		}
		fmt.Fprintf(env.stdout, "  %s %-14s %s\n", mark, l.Layer, l.Detail)
	}
	fmt.Fprintln(env.stdout, "launcher:", rep.Launcher)
	fmt.Fprintln(env.stdout, "cgroups:", rep.Cgroups)
	if len(cfg.Sandbox.AllowMissing) > 0 {
		var s []string
		for _, l := range cfg.Sandbox.AllowMissing {
			s = append(s, string(l))
		}
		fmt.Fprintf(env.stdout, "accepted missing (sandbox.allow_missing): %s\n", strings.Join(s, ", "))
	}
	fmt.Fprintln(env.stdout, "native tools:")
	for _, t := range tools {
		state := "confined"
		if !t.Runs {
			state = "REFUSED"
		}
		fmt.Fprintf(env.stdout, "  %s [%s]\n    %s\n", t.Tool, state, t.Grant)
		if t.Error != "" {
			fmt.Fprintf(env.stdout, "    %s\n", t.Error)
		}
	}
	return nil
}
