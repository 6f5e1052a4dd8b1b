package hooks

import (
	"errors"
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
)

// Config is the hooks: section of kernel.yaml. Its zero value means the
// defaults: the credential scrubber and the output limiter on, no rules.
// A Config must not be modified after it was passed to NewChain or Reload.
//
//	hooks:
//	  scrubber:
//	    enabled: true                 # default true
//	    high_entropy: true            # default true
//	    extra_patterns: ['corp-[a-z0-9]{32}']
//	    allow_patterns: ['AKIAIOSFODNN7EXAMPLE']
//	  output_limit:
//	    enabled: true                 # default true
//	    max_bytes: 32768              # default 32768
//	    head: 24576                   # default 3/4 of max_bytes
//	    tail: 8192                    # default max_bytes - head
//	  rules:
//	    - name: no-rm
//	      phase: before
//	      match: tool == "run_command"
//	      command: {argv: [examples/hooks/block-rm.sh], timeout: 5s, env: [PATH]}
type Config struct {
	Scrubber    ScrubberConfig    `yaml:"scrubber" json:"scrubber"`
	OutputLimit OutputLimitConfig `yaml:"output_limit" json:"output_limit"`
	// Rules run in order: the first rule's before hook runs first and its
	// after hook last.
	Rules []Rule `yaml:"rules" json:"rules"`
}

// ScrubberConfig configures the built-in credential scrubber (see
// Scrubber). It runs on every result, errors included.
type ScrubberConfig struct {
	// Enabled defaults to true.
	Enabled *bool `yaml:"enabled" json:"enabled,omitempty"`
	// HighEntropy turns the high-entropy detector on (default true).
	HighEntropy *bool `yaml:"high_entropy" json:"high_entropy,omitempty"`
	// ExtraPatterns are Go regular expressions of more secrets. A match is
	// replaced with [REDACTED]; when the pattern has a capturing group,
	// only the first group is.
	ExtraPatterns []string `yaml:"extra_patterns" json:"extra_patterns,omitempty"`
	// AllowPatterns are Go regular expressions of text that is never
	// redacted: a finding inside a match is dropped.
	AllowPatterns []string `yaml:"allow_patterns" json:"allow_patterns,omitempty"`
	// Known are the exact secrets the process holds, redacted first and
	// always (see KnownSecrets); nil for none. Not configuration: the
	// program that reads the secrets sets it.
	Known *KnownSecrets `yaml:"-" json:"-"`
	// Answers also scrubs every model answer (its text and reasoning)
	// before it is stored, shown or acted on: an after_model hook named
	// scrubber, first of that point. Default false.
	Answers bool `yaml:"answers" json:"answers,omitempty"`
}

// OutputLimitConfig configures the built-in output limiter: a result longer
// than MaxBytes keeps its first Head and last Tail bytes, and the middle is
// replaced by a marker line saying how much was cut.
type OutputLimitConfig struct {
	// Enabled defaults to true.
	Enabled *bool `yaml:"enabled" json:"enabled,omitempty"`
	// MaxBytes defaults to 32768.
	MaxBytes int `yaml:"max_bytes" json:"max_bytes,omitempty"`
	// Head defaults to 3/4 of MaxBytes, Tail to MaxBytes-Head; Head+Tail
	// must not exceed MaxBytes.
	Head int `yaml:"head" json:"head,omitempty"`
	Tail int `yaml:"tail" json:"tail,omitempty"`
}

// DefaultMaxBytes is the output limiter's default limit.
const DefaultMaxBytes = 32768

// DefaultCommandTimeout bounds a command hook that sets no timeout.
const DefaultCommandTimeout = 10 * time.Second

// Rule is one configured hook. It has exactly one kind: Command, Plugin,
// BlockWhen, SetContext, SetArgs, Redact or Truncate; which kinds a point
// takes is docs/hooks.md's table.
type Rule struct {
	// Name identifies the hook in events and errors: 1-64 characters of
	// [A-Za-z0-9_.-], unique, not "scrubber" or "output_limit".
	Name string `yaml:"name" json:"name"`
	// Phase is the hook point (kernel.HookPoints): "before" or "after"
	// for a tool call's hooks, or a lifecycle point (run_start,
	// before_compact, before_model, after_model, run_end). It is required
	// for command, plugin, block_when and set_context hooks; set_args
	// implies before, redact and truncate after.
	Phase Phase `yaml:"phase" json:"phase,omitempty"`
	// Concurrent runs a before_model hook beside the model call as a
	// guardrail: its block cancels the call in flight (command, plugin
	// and block_when hooks).
	Concurrent bool `yaml:"concurrent" json:"concurrent,omitempty"`
	// Match is an expr expression over Env that selects the calls the hook
	// applies to; empty means every call.
	Match string `yaml:"match" json:"match,omitempty"`
	// Fail is fail_closed (the default) or fail_open: what happens when
	// the hook itself fails (its matcher errs, its command times out or
	// answers nonsense, its rewrite is invalid). Closed, the call is not
	// run (before) or its result is withheld (after); open, the call goes
	// on as if the hook were not there.
	Fail FailMode `yaml:"fail" json:"fail,omitempty"`
	// Message is the reason the model reads when a block_when hook blocks,
	// or a command hook exits with code 2 and prints nothing on stderr.
	Message string `yaml:"message" json:"message,omitempty"`

	Command    *CommandConfig  `yaml:"command" json:"command,omitempty"`
	Plugin     *PluginConfig   `yaml:"plugin" json:"plugin,omitempty"`
	BlockWhen  string          `yaml:"block_when" json:"block_when,omitempty"`
	SetContext string          `yaml:"set_context" json:"set_context,omitempty"`
	SetArgs    string          `yaml:"set_args" json:"set_args,omitempty"`
	Redact     []string        `yaml:"redact" json:"redact,omitempty"`
	Truncate   *TruncateConfig `yaml:"truncate" json:"truncate,omitempty"`
}

// PluginConfig runs a hook a subprocess plugin serves (its hook service;
// docs/plugins.md): Name is the plugin's name in tools.plugins, Hook the
// hook's name in the plugin.
type PluginConfig struct {
	Name string `yaml:"name" json:"name"`
	Hook string `yaml:"hook" json:"hook"`
	// Timeout bounds one call (default 10s, at most 10m).
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// CommandConfig runs an external program as a hook (see docs/hooks.md for
// the protocol).
type CommandConfig struct {
	// Argv is the program and its arguments. A program path with a slash
	// is resolved against Options.Dir when relative; a bare name is looked
	// up in PATH when the configuration is loaded.
	Argv []string `yaml:"argv" json:"argv"`
	// Timeout bounds one run (default 10s, at most 10m); the process
	// group is killed when it expires.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
	// Env names the environment variables the program gets, copied from
	// the kernel's environment. Nothing else is passed, not even PATH.
	Env []string `yaml:"env" json:"env,omitempty"`
	// Sandbox adds to the hook's grant (package sandbox). By default the
	// hook reads and runs the system directories, its own program file,
	// the files its argv names (CommandFiles, with their package
	// directories) and (read-only) Options.Workspace; it writes nothing
	// and has no network. Its env is ignored: Env is the allowlist.
	Sandbox sandbox.Grant `yaml:"sandbox" json:"sandbox,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("5s") in
// YAML and JSON: the one type of internal/config.
type Duration = config.Duration

// TruncateConfig keeps the first Head and last Tail bytes of a result longer
// than Head+Tail.
type TruncateConfig struct {
	Head int `yaml:"head" json:"head"`
	Tail int `yaml:"tail" json:"tail"`
}

// Phase says where a hook runs: its hook point (kernel.HookPoints).
type Phase = kernel.HookPoint

// The phases of a tool call's hooks: before the policy decision, or after
// the tool ran.
const (
	PhaseBefore Phase = kernel.PointBeforeTool
	PhaseAfter  Phase = kernel.PointAfterTool
)

// FailMode says what happens when a hook fails.
type FailMode string

// The failure modes.
const (
	FailClosed FailMode = "fail_closed"
	FailOpen   FailMode = "fail_open"
)

// The names of the built-in hooks, as events and errors show them.
const (
	NameScrubber    = "scrubber"
	NameOutputLimit = "output_limit"
)

// ConfigError is a bad hook configuration (internal/config's Error, the
// kernel's one configuration error): Kind "hook" and Name the hook's name
// when it has one, Field the field from the top of the configuration
// ("hooks.rules[0].match").
type ConfigError = config.Error

// hookError is a *ConfigError about field (under hooks.) of the hook
// called name.
func hookError(name, field string, err error) *ConfigError {
	return &ConfigError{Kind: "hook", Name: name, Field: "hooks." + field, Err: err}
}

func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

func enabled(b *bool) bool { return b == nil || *b }
