package main

import (
	"path/filepath"

	"github.com/agentkernel/agentkernel/kernel"

	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
)

// nativeGrants maps what `kernel tools` shows in GRANTED for native
// tools: run_command by name, a subprocess plugin's tools by their Source
// ("subprocess:<plugin>"), each the compact form of the grant the process
// runs under (the same as `kernel sandbox check`). WASM tools show their
// own effective capabilities.
func nativeGrants(cfg *Config) map[string]string {
	out := map[string]string{}
	withGlobal := func(g sandbox.Grant) string {
		g.AllowMissing = append(g.AllowMissing, cfg.Sandbox.AllowMissing...)
		return "sandbox: " + g.Describe()
	}
	out["run_command"] = withGlobal(builtin.CommandGrant(cfg.path(cfg.Workspace), cfg.Tools.Builtin))
	if pcs, err := cfg.pluginConfigs(); err == nil {
		for _, pc := range pcs {
			if eff, _, err := subprocess.EffectiveConfig(pc); err == nil {
				pc = eff // requested ∩ granted
			}
			out["subprocess:"+pc.Name] = withGlobal(subprocess.PluginGrant(pc, "<private copy of "+filepath.Base(pc.Path)+">", "<go-plugin socket dir>"))
		}
	}
	return out
}

// grantedColumn is the GRANTED cell of one tool.
func grantedColumn(t kernel.Tool, native map[string]string, name, source string) string {
	if s := capabilities(t); s != "-" {
		return s
	}
	if g, ok := t.(interface{ Granted() string }); ok { // declared http and command tools
		return g.Granted()
	}
	if s, ok := native[name]; ok {
		return s
	}
	if s, ok := native[source]; ok {
		return s
	}
	return "-"
}
