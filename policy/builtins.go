package policy

import (
	"encoding/json"

	"github.com/agentkernel/agentkernel/kernel"
)

// BuiltinSpecs returns the specs policy assumes for the kernel's built-in
// tools (read_file, list_dir, search, write_file, edit_file, run_command)
// when Options.Tools does not describe them: in `kernel policy test` and
// `explain` without a configuration. They carry the tiers and the argument
// names policy extracts (path, argv); a registered tool always wins.
func BuiltinSpecs() []kernel.ToolSpec {
	mk := func(name string, tier kernel.Tier, tags []string, schema string) kernel.ToolSpec {
		return kernel.ToolSpec{Name: name, Tier: tier, Tags: tags, Source: "builtin", Schema: json.RawMessage(schema)}
	}
	const pathOnly = `{"type":"object","properties":{"path":{"type":"string"}}}`
	return []kernel.ToolSpec{
		mk("read_file", kernel.TierReadOnly, []string{"fs", "read"}, `{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}}}`),
		mk("list_dir", kernel.TierReadOnly, []string{"fs", "read"}, pathOnly),
		mk("search", kernel.TierReadOnly, []string{"fs", "read", "search"}, `{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}}}`),
		mk("write_file", kernel.TierSideEffecting, []string{"fs", "write"}, `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`),
		mk("edit_file", kernel.TierSideEffecting, []string{"fs", "write", "edit"}, `{"type":"object","properties":{"path":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"}}}`),
		mk("run_command", kernel.TierPrivileged, []string{"exec"}, `{"type":"object","properties":{"argv":{"type":"array","items":{"type":"string"}},"timeout_seconds":{"type":"integer"}}}`),
	}
}

// specSet finds a tool's spec by name: the registered tools first, then
// BuiltinSpecs, else a spec with the name only.
type specSet struct {
	byName map[string]kernel.ToolSpec
}

func newSpecSet(registered []kernel.ToolSpec) *specSet {
	s := &specSet{byName: map[string]kernel.ToolSpec{}}
	for _, t := range BuiltinSpecs() {
		s.byName[t.Name] = t
	}
	for _, t := range registered {
		s.byName[t.Name] = t
	}
	return s
}

func (s *specSet) get(name string) kernel.ToolSpec {
	if t, ok := s.byName[name]; ok {
		return t
	}
	return kernel.ToolSpec{Name: name}
}
