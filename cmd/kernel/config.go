package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/schemas"
	"github.com/agentkernel/agentkernel/telemetry"
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
	MCPServe     MCPServeConfig    `yaml:"mcp_serve"`
	Telemetry    telemetry.Config  `yaml:"telemetry"`
	Memory       MemoryConfig      `yaml:"memory"`
	// Agents and Pipelines are agents: and pipelines: (package agents;
	// cmd/kernel/agents.go), and agentsFile and pipelinesFile the files
	// that set them, which their errors name.
	Agents                    yaml.Node `yaml:"agents"`
	Pipelines                 yaml.Node `yaml:"pipelines"`
	agentsFile, pipelinesFile string

	// dir is the directory relative paths are resolved against: the config
	// file's, or the working directory without one.
	dir   string
	file  string
	files []string // every file laid over the defaults, in order
	// keysFile is kernel serve's API key file (see keysPath).
	keysFile string
	// storeDir is --store, which wins over store.dir.
	storeDir string
	// policyFile is --policy, which wins over policy.file.
	policyFile string
	// policyNoCache is --no-cache: run the policy's tests on every load.
	policyNoCache bool
	// layers are the files considered, in order (cmd_config.go).
	layers []configLayer
	// modelNameSet is true when a file sets model.name.
	modelNameSet bool
	// workspaceID, when set, is the identity the workspace must have (a
	// resumed session's record).
	workspaceID *kernel.FileID
	// mcpFile is the file whose tools.mcp is in effect (the last layer
	// that sets it): the one errors about an MCP server name.
	mcpFile string
	// allowSetBy are the files (absolute) that set
	// security.allow_writable: checkProtected refuses one a tool can write.
	allowSetBy []string
	// logLevel is --log-level, else $KERNEL_LOG, else warn.
	logLevel string
	// spanExporter replaces the configured span exporter (cliEnv.spans).
	spanExporter sdktrace.SpanExporter
	// toolProtocol and toolFormat are --tool-protocol and --tool-format,
	// which win over every model's configured ones.
	toolProtocol, toolFormat string
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
	// ToolProtocol (native, text, auto) and ToolFormat (hermes, json)
	// say how the model is offered tools (docs/providers.md); overrides
	// and the catalog set them per model.
	ToolProtocol string `yaml:"tool_protocol"`
	ToolFormat   string `yaml:"tool_format"`
	// Catalog is a model catalog file laid over the embedded one.
	Catalog string `yaml:"catalog"`
	// The anthropic provider's request shaping (docs/providers.md):
	// max_tokens (default the catalog's max_output), extended thinking,
	// and the prompt cache's breakpoints.
	MaxTokens int64          `yaml:"max_tokens"`
	Thinking  ThinkingConfig `yaml:"thinking"`
	Cache     string         `yaml:"cache"`
	CacheTTL  string         `yaml:"cache_ttl"`
}

// ThinkingConfig is model.thinking (anthropic.Thinking).
type ThinkingConfig struct {
	Type         string `yaml:"type"`
	BudgetTokens int64  `yaml:"budget_tokens"`
	Display      string `yaml:"display"`
}

// ModelOverride is the request shaping of one model, and for a fallback
// served by another API, where it is (provider, base_url, api_key_env).
type ModelOverride struct {
	ParallelToolCalls *bool          `yaml:"parallel_tool_calls"`
	ToolChoice        string         `yaml:"tool_choice"`
	ReasoningEffort   string         `yaml:"reasoning_effort"`
	ToolProtocol      string         `yaml:"tool_protocol"`
	ToolFormat        string         `yaml:"tool_format"`
	Provider          string         `yaml:"provider"`
	BaseURL           string         `yaml:"base_url"`
	APIKeyEnv         string         `yaml:"api_key_env"`
	MaxTokens         int64          `yaml:"max_tokens"`
	Thinking          ThinkingConfig `yaml:"thinking"`
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
	// ToolQueueTimeout bounds one tool call's time in line (0:
	// kernel.DefaultToolQueueTimeout); see docs/wasm.md.
	ToolQueueTimeout time.Duration `yaml:"tool_queue_timeout"`
	// MaxCorrections caps the text tool protocol's corrections per run
	// (0: kernel.DefaultMaxCorrections).
	MaxCorrections int `yaml:"max_corrections"`
	// MaxAgentDepth bounds how deep agents call agents (0:
	// kernel.DefaultMaxDepth); see docs/agents.md.
	MaxAgentDepth int `yaml:"max_agent_depth"`
	// MaxContinuations caps how often run_end hooks continue one run
	// (0: kernel.DefaultMaxContinuations).
	MaxContinuations int `yaml:"max_continuations"`
	// WASMMemoryBudgetMB caps the memory all WASM instances hold at once
	// (0: half the machine's memory); see docs/wasm.md.
	WASMMemoryBudgetMB int `yaml:"wasm_memory_budget_mb"`
	// WASMMaxRunning caps WASM guests running at once (0: CPUs - 1).
	WASMMaxRunning int `yaml:"wasm_max_running"`
}

// ToolsConfig lists the tool sources.
type ToolsConfig struct {
	Builtin builtin.Config `yaml:"builtin"`
	Plugins yaml.Node      `yaml:"plugins"`
	WASM    yaml.Node      `yaml:"wasm"`
	MCP     yaml.Node      `yaml:"mcp"`
	// HTTP, Command and Inline are the declared tools (plugins/declared).
	HTTP    yaml.Node `yaml:"http"`
	Command yaml.Node `yaml:"command"`
	Inline  yaml.Node `yaml:"inline"`
}

// ConfigError is a configuration problem with its place (file, line,
// column, field).
type ConfigError = config.Error

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

// pathFields are the config fields that hold file system paths: those
// schemas/config.schema.json annotates "x-path": true. They are made
// absolute, against the directory of the file that sets them, before
// decoding.
var pathFields = func() []string {
	data, err := schemas.FS.ReadFile("config.schema.json")
	if err != nil {
		panic(err)
	}
	f, err := config.PathFields(data)
	if err != nil {
		panic(err)
	}
	return f
}()

// absolutize rewrites the path fields of one layer's document.
func absolutize(doc *yaml.Node, dir string) { config.ResolvePaths(doc, pathFields, dir) }

func walkPath(n *yaml.Node, parts []string, fn func(*yaml.Node)) { config.WalkPath(n, parts, fn) }

// resolvePath makes p absolute against dir ("~/" is the home directory).
func resolvePath(dir, p string) string { return config.ResolvePath(dir, p) }

var configSchema = schema.MustEmbedded("config.schema.json")

// layer validates one YAML document and decodes it over cfg; dir is the
// directory its relative paths are relative to.
func (cfg *Config) layer(name, dir string, data []byte) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return config.SyntaxError(name, data, err)
	}
	if len(root.Content) == 0 {
		return nil // an empty file changes nothing
	}
	if err := validateNode(name, &root, configSchema); err != nil {
		return config.WithSource(err, name, data)
	}
	if name != "(embedded defaults)" && setsField(root.Content[0], "model.name") {
		cfg.modelNameSet = true
	}
	if setsField(root.Content[0], "tools.mcp") {
		cfg.mcpFile = name
	}
	if name != "(embedded defaults)" && setsField(root.Content[0], "security.allow_writable") {
		if abs, err := filepath.Abs(name); err == nil {
			cfg.allowSetBy = append(cfg.allowSetBy, abs)
		}
	}
	if setsField(root.Content[0], "agents") {
		cfg.agentsFile = name
	}
	if setsField(root.Content[0], "pipelines") {
		cfg.pipelinesFile = name
	}
	absolutize(root.Content[0], dir)
	if err := root.Content[0].Decode(cfg); err != nil {
		return config.WithSource(yamlError(name, err), name, data)
	}
	return nil
}

// validateNode checks a YAML document against a JSON Schema and reports the
// first violations with their line and column.
func validateNode(name string, root *yaml.Node, s *schema.Schema) error {
	inst, err := config.Instance(name, root)
	if err != nil {
		return err
	}
	verr := s.Validate(inst)
	probs := schema.Problems(verr)
	if probs == nil {
		return verr
	}
	located := make([]config.Problem, len(probs))
	for i, p := range probs {
		located[i] = config.Problem{Location: p.Location, Message: p.Message, Allowed: p.Allowed}
	}
	return config.Locate(name, "config.schema.json", root, located)
}

func yamlError(name string, err error) error { return config.YAMLError(name, err) }

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

// section decodes the config section n (field names it, "tools.plugins")
// into v; an error names the file, the field and, when YAML gives one, the
// line.
func (cfg *Config) section(field string, n *yaml.Node, v any) error {
	if err := decodeNode(n, v); err != nil {
		ce, ok := config.YAMLError(cfg.source(), err).(*ConfigError)
		if !ok {
			return err
		}
		ce.Field = field
		return ce
	}
	return nil
}
