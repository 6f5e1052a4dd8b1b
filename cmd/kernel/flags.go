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
	// workspaceID is the identity a resumed session recorded for its
	// workspace (resume): the built-in tools refuse another directory.
	workspaceID *kernel.FileID
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.Var(&c.config, "config", "configuration `FILE` (YAML, see schemas/config.schema.json); repeat to lay files over each other; embedded defaults without it")
	fs.StringVar(&c.model, "model", "", "model `NAME` (model.name)")
	fs.StringVar(&c.baseURL, "base-url", "", "OpenAI-compatible API base `URL`, e.g. http://127.0.0.1:11434/v1 (model.base_url)")
	fs.StringVar(&c.apiKeyEnv, "api-key-env", "", "environment `VARIABLE` holding the API key (model.api_key_env)")
	fs.StringVar(&c.workspace, "workspace", "", "`DIR` the built-in tools are confined to (workspace)")
	fs.Var(&c.maxTurns, "max-turns", "maximum model turns per run, at least 1 (limits.max_turns)")
	c.provider.allowed = []string{"openai", "scripted"}
	fs.Var(&c.provider, "provider", "model provider: openai or scripted (model.provider)")
	fs.StringVar(&c.script, "script", "", "script `FILE` for the scripted provider (model.script)")
	fs.Var(&c.timeout, "model-timeout", "deadline of one model call, e.g. 90s or 5m (model.timeout)")
	fs.Var(&c.idle, "model-idle-timeout", "end a model stream that sends nothing for this long, e.g. 30s (model.idle_timeout)")
	fs.Var(&c.fallbacks, "fallback", "fallback model `NAME`, tried when the model is unavailable; repeatable (model.fallbacks)")
	fs.StringVar(&c.policy, "policy", "", "policy `FILE` (policy.file; see docs/policy.md)")
	fs.BoolVar(&c.noCache, "no-cache", false, "run the policy's tests even when the test cache vouches for the file")
	fs.StringVar(&c.store, "store", "", "session store `DIR` (store.dir; default $XDG_DATA_HOME/agentkernel)")
	c.logLevel.allowed = logLevels
	fs.Var(&c.logLevel, "log-level", "log `LEVEL` on stderr: "+strings.Join(logLevels, ", ")+" (default $KERNEL_LOG, else warn)")
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
	// script, not as the defaults' OpenAI model.
	if cfg.Model.Provider == "scripted" && c.model == "" && !cfg.modelNameSet {
		cfg.Model.Name = "scripted"
	}
	if c.idle.set {
		cfg.Model.IdleTimeout = c.idle.d
	}
	if len(c.fallbacks) > 0 {
		cfg.Model.Fallbacks = c.fallbacks
	}
	return cfg, nil
}

// newFlagSet returns a FlagSet that prints its usage to w and returns
// errors instead of exiting.
func newFlagSet(name, args string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: kernel %s [flags] %s\n\nFlags:\n", name, args)
		printFlags(w, fs)
	}
	recordFlagSet(w, fs)
	return fs
}

// subcommand splits `kernel GROUP SUB [flags]`: with no SUB or -h it prints
// the group's usage and returns ok false; otherwise a FlagSet for SUB with
// the common flags registered.
func subcommand(group, usageText string, args []string, env *cliEnv) (sub string, rest []string, fs *flag.FlagSet, cf *commonFlags, ok bool) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(env.stdout, usageText)
		recordGroupUsage(env.stdout, usageText)
		return "", nil, nil, nil, false
	}
	sub = args[0]
	fs = newFlagSet(group+" "+sub, "", env.stderr)
	cf = &commonFlags{}
	cf.register(fs)
	return sub, args[1:], fs, cf, true
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
	if err := checkFlagOwners(fs); err != nil {
		return nil, err
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
