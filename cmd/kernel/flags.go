package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// commonFlags are the flags every command that builds a kernel accepts.
type commonFlags struct {
	config    stringList
	model     string
	baseURL   string
	apiKeyEnv string
	workspace string
	maxTurns  int
	provider  string
	script    string
	timeout   time.Duration
	idle      time.Duration
	fallbacks stringList
	store     string
	policy    string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.Var(&c.config, "config", "configuration `FILE` (YAML, see schemas/config.schema.json); repeat to lay files over each other; embedded defaults without it")
	fs.StringVar(&c.model, "model", "", "model `NAME` (model.name)")
	fs.StringVar(&c.baseURL, "base-url", "", "OpenAI-compatible API base `URL`, e.g. http://127.0.0.1:11434/v1 (model.base_url)")
	fs.StringVar(&c.apiKeyEnv, "api-key-env", "", "environment `VARIABLE` holding the API key (model.api_key_env)")
	fs.StringVar(&c.workspace, "workspace", "", "`DIR` the built-in tools are confined to (workspace)")
	fs.IntVar(&c.maxTurns, "max-turns", 0, "maximum model turns per run (limits.max_turns)")
	fs.StringVar(&c.provider, "provider", "", "model provider: openai or scripted (model.provider)")
	fs.StringVar(&c.script, "script", "", "script `FILE` for the scripted provider (model.script)")
	fs.DurationVar(&c.timeout, "model-timeout", 0, "deadline of one model call (model.timeout)")
	fs.DurationVar(&c.idle, "model-idle-timeout", 0, "end a model stream that sends nothing for this long (model.idle_timeout)")
	fs.Var(&c.fallbacks, "fallback", "fallback model `NAME`, tried when the model is unavailable; repeatable (model.fallbacks)")
	fs.StringVar(&c.policy, "policy", "", "policy `FILE` (policy.file; see docs/policy.md)")
	fs.StringVar(&c.store, "store", "", "session store `DIR` (store.dir; default $XDG_DATA_HOME/agentkernel)")
}

// load reads the configuration and applies the flags over it. Flag paths
// are relative to the working directory, not the config file.
func (c *commonFlags) load() (*Config, error) {
	cfg, err := loadConfig(c.config...)
	if err != nil {
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
	set(&cfg.Model.Provider, c.provider)
	if c.workspace != "" {
		cfg.Workspace = absPath(c.workspace)
	}
	if c.script != "" {
		cfg.Model.Script = absPath(c.script)
		if c.provider == "" {
			cfg.Model.Provider = "scripted"
		}
	}
	if c.policy != "" {
		cfg.policyFile = absPath(c.policy)
	}
	if c.store != "" {
		cfg.storeDir = absPath(c.store)
	}
	if c.maxTurns < 0 {
		return nil, fmt.Errorf("--max-turns must be positive, got %d", c.maxTurns)
	}
	if c.maxTurns > 0 {
		cfg.Limits.MaxTurns = c.maxTurns
	}
	if c.timeout > 0 {
		cfg.Model.Timeout = c.timeout
	}
	if c.idle > 0 {
		cfg.Model.IdleTimeout = c.idle
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
		fs.PrintDefaults()
	}
	return fs
}

// subcommand splits `kernel GROUP SUB [flags]`: with no SUB or -h it prints
// the group's usage and returns ok false; otherwise a FlagSet for SUB with
// the common flags registered.
func subcommand(group, usageText string, args []string, env *cliEnv) (sub string, rest []string, fs *flag.FlagSet, cf *commonFlags, ok bool) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(env.stdout, usageText)
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
	pos, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, exitError{code: 0}
	case err != nil:
		return nil, exitError{code: 2}
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
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			continue
		}
	}
}
