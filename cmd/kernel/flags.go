package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/toolproto"
)

// commonFlags are the flags every command that builds a kernel accepts.
type commonFlags struct {
	config    stringList
	model     string
	baseURL   string
	apiKeyEnv string
	workspace string
	maxTurns  positiveInt
	provider  oneOf
	script    string
	timeout   positiveDuration
	idle      positiveDuration
	fallbacks stringList
	store     string
	policy    string
	noCache   bool
	logLevel  oneOf
	// toolProtocol and toolFormat apply to every model of the run.
	toolProtocol oneOf
	toolFormat   oneOf
	// workspaceID is the identity a resumed session recorded for its
	// workspace (resume): the built-in tools refuse another directory.
	workspaceID *kernel.FileID
	// agent and pipeline are run's --agent and --pipeline: the kernel
	// of that agent or pipeline runs (agents.go).
	agent, pipeline string
}

// register registers on fs the common flags the command fs is for reads
// (commonFlagsOf, by fs's name): its help lists those and no others, and
// any other is a usage error. A flag it does not register keeps its zero
// value, which load leaves alone.
func (c *commonFlags) register(fs *flag.FlagSet) {
	groups, ok := commonFlagsOf[fs.Name()]
	if !ok {
		groups = flagsAll
	}
	if groups&flagsConfig != 0 {
		fs.Var(&c.config, "config", "configuration `FILE` (YAML, see schemas/config.schema.json); repeat to lay files over each other; embedded defaults without it")
		c.logLevel.allowed = logLevels
		fs.Var(&c.logLevel, "log-level", "log `LEVEL` on stderr: "+strings.Join(logLevels, ", ")+" (default $KERNEL_LOG, else warn)")
	}
	if groups&flagsModel != 0 {
		fs.StringVar(&c.model, "model", "", "model `NAME` (model.name)")
		fs.StringVar(&c.baseURL, "base-url", "", "OpenAI-compatible API base `URL`, e.g. http://127.0.0.1:11434/v1 (model.base_url)")
		fs.StringVar(&c.apiKeyEnv, "api-key-env", "", "environment `VARIABLE` holding the API key (model.api_key_env)")
		fs.Var(&c.maxTurns, "max-turns", "maximum model turns per run, at least 1 (limits.max_turns)")
		c.provider.allowed = []string{"openai", "anthropic", "scripted"}
		fs.Var(&c.provider, "provider", "model provider: openai, anthropic or scripted (model.provider)")
		fs.StringVar(&c.script, "script", "", "script `FILE` for the scripted provider (model.script)")
		fs.Var(&c.timeout, "model-timeout", "deadline of one model call, e.g. 90s or 5m (model.timeout)")
		fs.Var(&c.idle, "model-idle-timeout", "end a model stream that sends nothing for this long, e.g. 30s (model.idle_timeout)")
		fs.Var(&c.fallbacks, "fallback", "fallback model `NAME`, tried when the model is unavailable; repeatable (model.fallbacks)")
		c.toolProtocol.allowed = toolModes()
		fs.Var(&c.toolProtocol, "tool-protocol", "offer tools by `MODE`: native, text or auto (model.tool_protocol; see docs/providers.md)")
		c.toolFormat.allowed = toolproto.Formats()
		fs.Var(&c.toolFormat, "tool-format", "write the text tool protocol in `SYNTAX`: hermes or json (model.tool_format)")
	}
	if groups&flagsWorkspace != 0 {
		fs.StringVar(&c.workspace, "workspace", "", "`DIR` the built-in tools are confined to (workspace)")
	}
	if groups&flagsPolicy != 0 {
		fs.StringVar(&c.policy, "policy", "", "policy `FILE` (policy.file; see docs/policy.md)")
	}
	if groups&flagsPolicyTests != 0 {
		fs.BoolVar(&c.noCache, "no-cache", false, "run the policy's tests even when the test cache vouches for the file")
	}
	if groups&flagsStore != 0 {
		fs.StringVar(&c.store, "store", "", "session store `DIR` (store.dir; default $XDG_DATA_HOME/agentkernel)")
	}
}

// flagGroup is a set of the common flags, by what they configure.
type flagGroup uint8

const (
	flagsConfig      flagGroup = 1 << iota // --config, --log-level
	flagsModel                             // the model and its calls, --max-turns
	flagsWorkspace                         // --workspace
	flagsPolicy                            // --policy
	flagsPolicyTests                       // --no-cache: a policy is loaded, its tests run
	flagsStore                             // --store
	flagsAll         = flagsConfig | flagsModel | flagsWorkspace | flagsPolicy | flagsPolicyTests | flagsStore
)

// flagGroupTitles head the common flags in a command's help, in this
// order, after the command's own flags.
var flagGroupTitles = []struct {
	groups flagGroup
	title  string
}{
	{flagsConfig, "Configuration"},
	{flagsModel, "Model"},
	{flagsWorkspace | flagsPolicy | flagsPolicyTests, "Workspace and policy"},
	{flagsStore, "Session store"},
}

// commonFlagGroup is the group of each common flag.
var commonFlagGroup = map[string]flagGroup{
	"config": flagsConfig, "log-level": flagsConfig,
	"model": flagsModel, "base-url": flagsModel, "api-key-env": flagsModel, "max-turns": flagsModel, "provider": flagsModel,
	"script": flagsModel, "model-timeout": flagsModel, "model-idle-timeout": flagsModel, "fallback": flagsModel,
	"tool-protocol": flagsModel, "tool-format": flagsModel,
	"workspace": flagsWorkspace, "policy": flagsPolicy, "no-cache": flagsPolicyTests, "store": flagsStore,
}

// commonFlagsOf says which common flags each command (or "GROUP SUB")
// reads; one not named reads them all (run, chat, approve, reject,
// sessions compact, config show, serve: they build a whole kernel, or show
// what one would be). TestHelpListsTheFlagsACommandReads holds each
// command's help to it.
var commonFlagsOf = map[string]flagGroup{
	// The store alone.
	"sessions ls": flagsConfig | flagsStore, "sessions show": flagsConfig | flagsStore,
	"sessions export": flagsConfig | flagsStore, "sessions import": flagsConfig | flagsStore,
	"sessions rm": flagsConfig | flagsStore, "sessions gc": flagsConfig | flagsStore,
	"sessions fsck": flagsConfig | flagsStore, "steer": flagsConfig | flagsStore,
	"keys create": flagsConfig | flagsStore, "keys list": flagsConfig | flagsStore, "keys revoke": flagsConfig | flagsStore,
	// The tools as run would register them, and the policy it would load.
	"tools":          flagsConfig | flagsWorkspace | flagsPolicy | flagsPolicyTests,
	"agents ls":      flagsConfig | flagsWorkspace | flagsPolicy | flagsPolicyTests,
	"agents show":    flagsConfig | flagsWorkspace | flagsPolicy | flagsPolicyTests,
	"mcp ls":         flagsConfig | flagsWorkspace | flagsPolicy | flagsPolicyTests,
	"mcp serve":      flagsConfig | flagsWorkspace | flagsPolicy | flagsPolicyTests | flagsStore,
	"mcp import":     flagsConfig | flagsWorkspace,
	"plugins verify": flagsConfig | flagsWorkspace,
	"plugins lock":   0, // a directory, nothing configured
	"tools import":   0, // a document, written to the --write FILE alone
	"sandbox check":  flagsConfig | flagsWorkspace,
	// A policy FILE against those tools, and stored sessions (check runs
	// the file's tests, so --no-cache).
	"policy check": flagsConfig | flagsWorkspace | flagsPolicyTests, "policy test": flagsConfig | flagsWorkspace,
	"policy explain": flagsConfig | flagsWorkspace, "policy replay": flagsConfig | flagsWorkspace | flagsStore,
	"policy diff": flagsConfig | flagsWorkspace | flagsStore, "policy coverage": flagsConfig | flagsWorkspace | flagsStore,
}

// load reads the configuration and applies the flags over it. Flag paths
// are relative to the working directory, not the config file.
func (c *commonFlags) load() (*Config, error) {
	cfg, err := loadConfig(c.config...)
	if err != nil {
		return nil, err
	}
	if cfg.logLevel, err = logLevel(c.logLevel.v); err != nil {
		return nil, err
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Model.Name, c.model)
	set(&cfg.Model.BaseURL, c.baseURL)
	if c.apiKeyEnv != "" && !isEnvName(c.apiKeyEnv) {
		// Never echo it: a key pasted here by mistake must not reach the
		// terminal, the logs or the shell history of a bug report.
		return nil, errors.New("--api-key-env: not an environment variable name; it names the variable that holds the key (e.g. OPENAI_API_KEY), never the key itself (the value is not shown)")
	}
	set(&cfg.Model.APIKeyEnv, c.apiKeyEnv)
	fileProvider := cfg.Model.Provider
	set(&cfg.Model.Provider, c.provider.v)
	if c.workspace != "" {
		cfg.Workspace = absPath(c.workspace)
	}
	cfg.workspaceID = c.workspaceID
	if c.script != "" {
		cfg.Model.Script = absPath(c.script)
		if c.provider.v == "" {
			cfg.Model.Provider = "scripted"
		}
	}
	if c.policy != "" {
		cfg.policyFile = absPath(c.policy)
	}
	cfg.policyNoCache = c.noCache
	if c.store != "" {
		cfg.storeDir = absPath(c.store)
	}
	if c.maxTurns.set {
		cfg.Limits.MaxTurns = c.maxTurns.n
	}
	if c.timeout.set {
		cfg.Model.Timeout = c.timeout.d
	}
	// A scripted run that names no model is labelled (and priced) as the
	// script, not as the defaults' OpenAI model; nor as the model of a
	// file written for another provider (kernel init's gpt-4o-mini) when
	// --script or --provider made the run scripted: that name is the real
	// model's, and would price a script at its rates.
	if cfg.Model.Provider == "scripted" && c.model == "" && (!cfg.modelNameSet || fileProvider != "scripted") {
		cfg.Model.Name = "scripted"
	}
	if c.idle.set {
		cfg.Model.IdleTimeout = c.idle.d
	}
	if len(c.fallbacks) > 0 {
		cfg.Model.Fallbacks = c.fallbacks
	}
	cfg.toolProtocol, cfg.toolFormat = c.toolProtocol.v, c.toolFormat.v
	cfg.holdSecrets()
	return cfg, nil
}

// newFlagSet returns a FlagSet that prints its usage to w and returns
// errors instead of exiting.
func newFlagSet(name, args string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintln(w, usageLine(name, args))
		printFlags(w, fs)
	}
	recordFlagSet(w, fs)
	return fs
}

// usageLine is the first line of a command's usage.
func usageLine(name, args string) string {
	return strings.TrimSpace(fmt.Sprintf("Usage: kernel %s [flags] %s", name, args))
}

// parseArgs parses a command's flags and returns its positional arguments.
// -h ends the program successfully after the usage; a bad flag with status 2.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	if !helpRequested(args) {
		// A bad flag prints its error and where the flags are, not all of them.
		full := fs.Usage
		fs.Usage = func() { fmt.Fprintf(fs.Output(), "Run `kernel help %s` for its flags.\n", fs.Name()) }
		defer func() { fs.Usage = full }()
	}
	pos, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, exitError{code: 0}
	case err != nil:
		return nil, exitError{code: exitUsage}
	}
	return pos, nil
}

// parseInterspersed parses flags that may come before or after the
// positional arguments (`kernel run "prompt" --max-turns 3` works too).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// positiveInt is an int flag that must be above zero: `--max-turns 0` and
// `--max-turns -1` are usage errors, not silently the default.
type positiveInt struct {
	n   int
	set bool
}

func (p *positiveInt) String() string {
	if p == nil || !p.set {
		return ""
	}
	return strconv.Itoa(p.n)
}

func (p *positiveInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return errors.New("not a whole number")
	}
	if n <= 0 {
		return fmt.Errorf("must be at least 1, got %d", n)
	}
	p.n, p.set = n, true
	return nil
}

// positiveDuration is a duration flag that must be above zero.
type positiveDuration struct {
	d   time.Duration
	set bool
}

func (p *positiveDuration) String() string {
	if p == nil || !p.set {
		return ""
	}
	return p.d.String()
}

func (p *positiveDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a duration (e.g. 90s, 5m, 1h30m)")
	}
	if d <= 0 {
		return fmt.Errorf("must be more than zero, got %s", v)
	}
	p.d, p.set = d, true
	return nil
}

// oneOf is a string flag with a fixed set of values.
type oneOf struct {
	v       string
	allowed []string
}

func (o *oneOf) String() string {
	if o == nil {
		return ""
	}
	return o.v
}

func (o *oneOf) Set(v string) error {
	for _, a := range o.allowed {
		if v == a {
			o.v = v
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(o.allowed, ", "))
}
