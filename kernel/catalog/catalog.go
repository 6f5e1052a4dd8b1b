// Package catalog is the model catalog: for each model its context window,
// maximum output, tokenizer, prices and capabilities. Defaults are
// embedded (models.yaml); a catalog file is laid over them entry by entry.
package catalog

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/toolproto"
)

//go:embed models.yaml
var defaultsYAML []byte

// Model is one catalog entry. Pointers are unset fields: a catalog file
// entry changes only the fields it sets.
type Model struct {
	ContextWindow int           `yaml:"context_window"`
	MaxOutput     int           `yaml:"max_output"`
	Tokenizer     string        `yaml:"tokenizer"`
	Prices        *kernel.Price `yaml:"prices"`
	// ParallelToolCalls says whether the model accepts the
	// parallel_tool_calls request field; Reasoning whether it reasons (and
	// accepts reasoning_effort). Request shaping reads them.
	ParallelToolCalls *bool `yaml:"parallel_tool_calls"`
	Reasoning         *bool `yaml:"reasoning"`
	// ToolProtocol (native, text, auto) and ToolFormat (hermes, json) say
	// how the model takes tools (kernel.ToolProtocol); empty leaves it to
	// the configuration (native, hermes).
	ToolProtocol string `yaml:"tool_protocol"`
	ToolFormat   string `yaml:"tool_format"`
}

// Catalog maps model names to entries. It is not modified after Load and
// is safe for concurrent reads.
type Catalog struct {
	models map[string]Model
}

type file struct {
	Models map[string]Model `yaml:"models"`
}

// Load returns the embedded catalog with the files laid over it, in order.
// An error names the file, line and field.
func Load(paths ...string) (*Catalog, error) {
	c := &Catalog{models: map[string]Model{}}
	if err := c.layer("(embedded model catalog)", defaultsYAML); err != nil {
		return nil, fmt.Errorf("embedded model catalog is invalid (a build problem): %w", err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("model.catalog: %w", err)
		}
		if err := c.layer(p, data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Catalog) layer(name string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("%s: %s (fields: context_window, max_output, tokenizer, prices, parallel_tool_calls, reasoning, tool_protocol, tool_format)", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	for _, n := range sortedKeys(f.Models) {
		m := f.Models[n]
		if m.Tokenizer != "" && m.Tokenizer != "o200k_base" && m.Tokenizer != "cl100k_base" {
			return fmt.Errorf("%s: models.%s.tokenizer: %q is not o200k_base or cl100k_base", name, n, m.Tokenizer)
		}
		if m.ContextWindow < 0 || m.MaxOutput < 0 {
			return fmt.Errorf("%s: models.%s: context_window and max_output must not be negative", name, n)
		}
		switch kernel.ToolProtocol(m.ToolProtocol) {
		case "", kernel.ToolProtocolNative, kernel.ToolProtocolText, kernel.ToolProtocolAuto:
		default:
			return fmt.Errorf("%s: models.%s.tool_protocol: %q is not native, text or auto", name, n, m.ToolProtocol)
		}
		if m.ToolFormat != "" {
			if _, err := toolproto.Lookup(m.ToolFormat); err != nil {
				return fmt.Errorf("%s: models.%s.tool_format: %w", name, n, err)
			}
		}
		old, ok := c.models[n]
		if !ok {
			c.models[n] = m
			continue
		}
		if m.ContextWindow != 0 {
			old.ContextWindow = m.ContextWindow
		}
		if m.MaxOutput != 0 {
			old.MaxOutput = m.MaxOutput
		}
		if m.Tokenizer != "" {
			old.Tokenizer = m.Tokenizer
		}
		if m.Prices != nil {
			old.Prices = m.Prices
		}
		if m.ParallelToolCalls != nil {
			old.ParallelToolCalls = m.ParallelToolCalls
		}
		if m.Reasoning != nil {
			old.Reasoning = m.Reasoning
		}
		if m.ToolProtocol != "" {
			old.ToolProtocol = m.ToolProtocol
		}
		if m.ToolFormat != "" {
			old.ToolFormat = m.ToolFormat
		}
		c.models[n] = old
	}
	return nil
}

// Lookup finds name: the entry of that name, or else the longest entry
// name followed by "-" or ":" that name starts with ("gpt-4o-2024-08-06"
// is gpt-4o, "qwen2.5-coder:7b" is qwen2.5-coder).
func (c *Catalog) Lookup(name string) (Model, bool) {
	if m, ok := c.models[name]; ok {
		return m, true
	}
	best := ""
	for n := range c.models {
		if len(n) > len(best) && len(name) > len(n) && strings.HasPrefix(name, n) && (name[len(n)] == '-' || name[len(n)] == ':') {
			best = n
		}
	}
	if best == "" {
		return Model{}, false
	}
	return c.models[best], true
}

// Prices returns every entry's price by model name.
func (c *Catalog) Prices() map[string]kernel.Price {
	out := map[string]kernel.Price{}
	for n, m := range c.models {
		if m.Prices != nil {
			out[n] = *m.Prices
		}
	}
	return out
}

// Names lists the entries, sorted.
func (c *Catalog) Names() []string { return sortedKeys(c.models) }

func sortedKeys(m map[string]Model) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
