package subprocess

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/internal/config/names"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// toolSpec is a tool as its plugin describes it, before namespacing. It is
// also the on-disk form of the Describe cache.
type toolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Tier        kernel.Tier     `json:"tier"`
	Tags        []string        `json:"tags,omitempty"`
	TimeoutMS   int64           `json:"timeout_ms,omitempty"`
	// ChecksSideEffects: the tool answers CheckSideEffect.
	ChecksSideEffects bool `json:"checks_side_effects,omitempty"`
}

func (a toolSpec) equal(b toolSpec) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.Schema, b.Schema) &&
		a.Tier == b.Tier && slices.Equal(a.Tags, b.Tags) && a.TimeoutMS == b.TimeoutMS &&
		a.ChecksSideEffects == b.ChecksSideEffects
}

// convertSpecs checks a plugin's Describe answer: names that make valid,
// unique "plugin.tool" names, known tiers, schemas that compile.
func convertSpecs(plugin string, in []*pluginpb.ToolSpec) ([]toolSpec, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("plugin %q describes no tools", plugin)
	}
	out := make([]toolSpec, 0, len(in))
	seen := map[string]bool{}
	for _, p := range in {
		s := toolSpec{
			Name: p.GetName(), Description: p.GetDescription(), Schema: compactJSON(p.GetSchema()),
			Tier: kernel.Tier(p.GetTier()), Tags: p.GetTags(), TimeoutMS: p.GetTimeoutMs(),
			ChecksSideEffects: p.GetChecksSideEffects(),
		}
		if err := s.check(plugin); err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("plugin %q describes tool %q twice", plugin, s.Name)
		}
		seen[s.Name] = true
		out = append(out, s)
	}
	return out, nil
}

// compactJSON returns b without insignificant whitespace, or b itself if it
// is not valid JSON (check reports that).
func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

func (s toolSpec) check(plugin string) error {
	full := plugin + "." + s.Name
	switch {
	case !names.PluginToolName.Valid(s.Name):
		return fmt.Errorf("plugin %q: tool name %v", plugin, names.PluginToolName.Check(s.Name))
	case len(full) > names.ToolName.Max():
		return fmt.Errorf("plugin %q: tool name %q is longer than %d characters; shorten the plugin or tool name", plugin, full, names.ToolName.Max())
	case !s.Tier.Valid():
		return fmt.Errorf("plugin %q: tool %q: tier %q is not one of read_only, side_effecting, privileged", plugin, s.Name, s.Tier)
	case s.TimeoutMS < 0:
		return fmt.Errorf("plugin %q: tool %q: negative timeout", plugin, s.Name)
	}
	if len(bytes.TrimSpace(s.Schema)) > 0 {
		if _, err := kernel.CompileSchema(full, s.Schema); err != nil {
			return fmt.Errorf("plugin %q: tool %q: %w", plugin, s.Name, err)
		}
	}
	return nil
}

// kernelSpec namespaces s for the kernel. timeout is the configured
// per-call timeout, which overrides the tool's own.
func (s toolSpec) kernelSpec(plugin string, timeout time.Duration) kernel.ToolSpec {
	if timeout <= 0 {
		timeout = time.Duration(s.TimeoutMS) * time.Millisecond
	}
	return kernel.ToolSpec{
		Name:        plugin + "." + s.Name,
		Description: s.Description,
		Schema:      s.Schema,
		Tier:        s.Tier,
		Tags:        slices.Clone(s.Tags),
		Timeout:     timeout,
		Source:      "subprocess:" + plugin,
	}
}
