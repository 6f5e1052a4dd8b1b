package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/builtin"
)

//go:embed defaults.yaml
var defaultsYAML []byte

// Config is kernel.yaml, decoded after validation against
// schemas/config.schema.json.
type Config struct {
	Model        ModelConfig       `yaml:"model"`
	SystemPrompt string            `yaml:"system_prompt"`
	Workspace    string            `yaml:"workspace"`
	Limits       LimitsConfig      `yaml:"limits"`
	Store        yaml.Node         `yaml:"store"`
	Policy       yaml.Node         `yaml:"policy"`
	Tools        ToolsConfig       `yaml:"tools"`
	Hooks        yaml.Node         `yaml:"hooks"`
	Context      ContextSection    `yaml:"context"`
	Compaction   CompactionSection `yaml:"compaction"`
	Security     SecurityConfig    `yaml:"security"`
	Sandbox      SandboxConfig     `yaml:"sandbox"`

	// dir is the directory relative paths are resolved against: the config
	// file's, or the working directory without one.
	dir   string
	file  string
	files []string // every file laid over the defaults, in order
	// storeDir is --store, which wins over store.dir.
	storeDir string
	// policyFile is --policy, which wins over policy.file.
	policyFile string
	// layers are the files considered, in order (cmd_config.go).
	layers []configLayer
	// modelNameSet is true when a file sets model.name.
	modelNameSet bool
	// logLevel is --log-level, else $KERNEL_LOG, else warn.
	logLevel string
}

// ModelConfig selects and prices the model.
type ModelConfig struct {
	Provider      string                  `yaml:"provider"`
	Name          string                  `yaml:"name"`
	BaseURL       string                  `yaml:"base_url"`
	APIKeyEnv     string                  `yaml:"api_key_env"`
	Script        string                  `yaml:"script"`
	ContextWindow int                     `yaml:"context_window"`
	Timeout       time.Duration           `yaml:"timeout"`
	Prices        map[string]kernel.Price `yaml:"prices"`
	// IdleTimeout ends a stream that sends nothing for this long (0: none).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// Fallbacks are tried in order when the model is unavailable or keeps
	// failing (docs/providers.md).
	Fallbacks []string `yaml:"fallbacks"`
	// Retry tunes the retries of failed model calls.
	Retry RetryConfig `yaml:"retry"`
	// The request shaping of docs/providers.md, for every model; Overrides
	// sets them per model name.
	ParallelToolCalls *bool                    `yaml:"parallel_tool_calls"`
	ToolChoice        string                   `yaml:"tool_choice"`
	ReasoningEffort   string                   `yaml:"reasoning_effort"`
	Overrides         map[string]ModelOverride `yaml:"overrides"`
	// Catalog is a model catalog file laid over the embedded one.
	Catalog string `yaml:"catalog"`
}

// ModelOverride is the request shaping of one model.
type ModelOverride struct {
	ParallelToolCalls *bool  `yaml:"parallel_tool_calls"`
	ToolChoice        string `yaml:"tool_choice"`
	ReasoningEffort   string `yaml:"reasoning_effort"`
}

// RetryConfig is model.retry (kernel.RetryPolicy).
type RetryConfig struct {
	MaxAttempts   int           `yaml:"max_attempts"`
	BaseDelay     time.Duration `yaml:"base_delay"`
	MaxDelay      time.Duration `yaml:"max_delay"`
	MaxRetryAfter time.Duration `yaml:"max_retry_after"`
	Budget        int           `yaml:"budget"`
}

// LimitsConfig holds the run's hard limits.
type LimitsConfig struct {
	MaxTurns    int           `yaml:"max_turns"`
	ToolTimeout time.Duration `yaml:"tool_timeout"`
	ApprovalTTL time.Duration `yaml:"approval_ttl"`
	// MaxConcurrentTools caps tool executions running at once (0: no cap).
	MaxConcurrentTools int `yaml:"max_concurrent_tools"`
}

// ToolsConfig lists the tool sources.
type ToolsConfig struct {
	Builtin builtin.Config `yaml:"builtin"`
	Plugins yaml.Node      `yaml:"plugins"`
	WASM    yaml.Node      `yaml:"wasm"`
	MCP     yaml.Node      `yaml:"mcp"`
}

// ConfigError is a configuration problem with its place.
type ConfigError struct {
	File   string
	Line   int
	Column int
	Field  string
	Msg    string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// loadConfig reads the embedded defaults and lays each file over them, in
// order; with no files, the ones found by discovery (configLayers). Each layer is validated against the schema first, so an error
// names the file, line and field; its relative paths are resolved against
// its own directory.
func loadConfig(paths ...string) (*Config, error) {
	cfg := &Config{}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if err := cfg.layer("(embedded defaults)", wd, defaultsYAML); err != nil {
		return nil, fmt.Errorf("embedded defaults are invalid (a build problem): %w", err)
	}
	cfg.dir = wd
	cfg.layers = configLayers(paths)
	for _, l := range cfg.layers {
		if !l.Found {
			continue
		}
		path := l.Path
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		if err := cfg.layer(path, filepath.Dir(abs), data); err != nil {
			return nil, err
		}
		cfg.dir, cfg.file = filepath.Dir(abs), abs
		cfg.files = append(cfg.files, abs)
	}
	return cfg, nil
}

// pathFields are the config fields that hold file system paths, as dotted
// paths where * matches any key or index. They are made absolute, against
// the directory of the file that sets them, before decoding.
var pathFields = []string{
	"workspace", "model.script", "model.catalog", "store.dir", "policy.file", "policy.decision_log",
	"tools.plugins.*.path", "tools.plugins.*.dir",
	"tools.wasm.*.path", "tools.wasm.*.grants.fs.*.host",
	"security.allow_writable.*",
	"tools.builtin.command_sandbox.fs.*.path", "tools.plugins.*.sandbox.fs.*.path",
	"hooks.rules.*.command.sandbox.fs.*.path", "tools.mcp.*.grant.fs.*.path",
}

// absolutize rewrites the path fields of one layer's document.
func absolutize(doc *yaml.Node, dir string) {
	for _, f := range pathFields {
		walkPath(doc, strings.Split(f, "."), func(n *yaml.Node) {
			if n.Kind == yaml.ScalarNode && n.Value != "" {
				n.Value = resolvePath(dir, n.Value)
			}
		})
	}
}

func walkPath(n *yaml.Node, parts []string, fn func(*yaml.Node)) {
	if len(parts) == 0 {
		fn(n)
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if parts[0] == "*" || n.Content[i].Value == parts[0] {
				walkPath(n.Content[i+1], parts[1:], fn)
			}
		}
	case yaml.SequenceNode:
		if parts[0] == "*" {
			for _, c := range n.Content {
				walkPath(c, parts[1:], fn)
			}
		}
	}
}

// resolvePath makes p absolute against dir ("~/" is the home directory).
func resolvePath(dir, p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

var configSchema = schema.MustEmbedded("config.schema.json")

// layer validates one YAML document and decodes it over cfg; dir is the
// directory its relative paths are relative to.
func (cfg *Config) layer(name, dir string, data []byte) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return yamlError(name, err)
	}
	if len(root.Content) == 0 {
		return nil // an empty file changes nothing
	}
	if err := validateNode(name, &root, configSchema); err != nil {
		return err
	}
	if name != "(embedded defaults)" && setsField(root.Content[0], "model.name") {
		cfg.modelNameSet = true
	}
	absolutize(root.Content[0], dir)
	if err := root.Content[0].Decode(cfg); err != nil {
		return yamlError(name, err)
	}
	return nil
}

// validateNode checks a YAML document against a JSON Schema and reports the
// first violations with their line and column.
func validateNode(name string, root *yaml.Node, schema *schema.Schema) error {
	var v any
	if err := root.Decode(&v); err != nil {
		return yamlError(name, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return &ConfigError{File: name, Msg: "not representable as JSON: " + err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var inst any
	if err := dec.Decode(&inst); err != nil {
		return &ConfigError{File: name, Msg: err.Error()}
	}
	verr := schema.Validate(inst)
	probs := kernel.SchemaProblems(verr)
	if probs == nil {
		return verr
	}
	var errs []error
	for _, leaf := range probs {
		ptr := strings.TrimSuffix(leaf.Location, "/")
		msg := leaf.Message
		if strings.HasPrefix(msg, "additionalProperties ") {
			// Point at the unknown key itself.
			if f := between(msg, "'", "'"); f != "" {
				ptr += "/" + f
				msg = "unknown field (check the spelling; see schemas/config.schema.json)"
			}
		}
		n := nodeAt(root.Content[0], ptr)
		ce := &ConfigError{File: name, Field: fieldName(ptr), Msg: msg}
		if n != nil {
			ce.Line, ce.Column = n.Line, n.Column
		}
		errs = append(errs, ce)
	}
	return errors.Join(errs...)
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i+1:], b)
	if j < 0 {
		return ""
	}
	return s[i+1 : i+1+j]
}

// nodeAt follows a JSON pointer through a YAML node; for a mapping key it
// returns the key node (where a person looks).
func nodeAt(n *yaml.Node, ptr string) *yaml.Node {
	if ptr == "" {
		return n
	}
	for _, part := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch n.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					next = n.Content[i+1]
					if strings.HasSuffix(ptr, "/"+part) {
						return n.Content[i]
					}
				}
			}
			if next == nil {
				return n
			}
			n = next
		case yaml.SequenceNode:
			i, err := strconv.Atoi(part)
			if err != nil || i >= len(n.Content) {
				return n
			}
			n = n.Content[i]
		default:
			return n
		}
	}
	return n
}

func fieldName(ptr string) string {
	if ptr == "" {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	var b strings.Builder
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil {
			fmt.Fprintf(&b, "[%s]", p)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func yamlError(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msg = strings.Join(te.Errors, "; ")
	}
	// yaml.v3 says "line N: ..."; lift the line into the position.
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if line, err := strconv.Atoi(rest[:i]); err == nil {
				return &ConfigError{File: name, Line: line, Column: 1, Msg: strings.TrimSpace(rest[i+1:])}
			}
		}
	}
	return &ConfigError{File: name, Msg: msg}
}

// path resolves p against the last config file's directory (paths in the
// files are already absolute; this is for values set in code).
func (cfg *Config) path(p string) string {
	if p == "" {
		return p
	}
	return resolvePath(cfg.dir, p)
}

// source names the config for messages.
func (cfg *Config) source() string {
	if cfg.file == "" {
		return "(embedded defaults)"
	}
	return cfg.file
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
