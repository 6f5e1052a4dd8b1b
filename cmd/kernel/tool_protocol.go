package main

import (
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/catalog"
)

// toolModes are the values of model.tool_protocol and --tool-protocol.
func toolModes() []string {
	var out []string
	for _, m := range kernel.ToolProtocols() {
		out = append(out, string(m))
	}
	return out
}

// toolProtocols resolves how each model of the run (the model and its
// fallbacks) is offered tools: --tool-protocol and --tool-format, then
// model.overrides.<name>, then model.tool_protocol and model.tool_format,
// then the model's catalog entry; native and hermes when nothing says.
// Only the models that are not plain native are in the map.
func (cfg *Config) toolProtocols(cat *catalog.Catalog) map[string]kernel.ModelTools {
	m := cfg.Model
	var out map[string]kernel.ModelTools
	for _, name := range append([]string{m.Name}, m.Fallbacks...) {
		entry, _ := cat.Lookup(name)
		o := m.Overrides[name]
		mode := first(cfg.toolProtocol, o.ToolProtocol, m.ToolProtocol, entry.ToolProtocol)
		if mode == "" || kernel.ToolProtocol(mode) == kernel.ToolProtocolNative {
			continue
		}
		if out == nil {
			out = map[string]kernel.ModelTools{}
		}
		out[name] = kernel.ModelTools{Protocol: kernel.ToolProtocol(mode), Format: first(cfg.toolFormat, o.ToolFormat, m.ToolFormat, entry.ToolFormat)}
	}
	return out
}

// first is the first non-empty string.
func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
