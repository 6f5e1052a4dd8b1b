package main

import (
	"os"
	"strings"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel/provider/anthropic"
	"github.com/agentkernel/agentkernel/kernel/provider/openai"
)

// heldSecrets are the secrets this process holds: the API key it sends,
// the credentials MCP servers and plugins get from its environment, the
// token `mcp serve` checks. Every scrubber of the CLI (the default one for
// errors, logs and events, and the hook chain's for tool results) redacts
// them first, wherever they appear. One process holds one set of secrets,
// so it is one value for the process, filled as the configuration is read.
// Why: RATIONALE.md, "Known secrets first".
var heldSecrets hooks.KnownSecrets

// holdSecrets registers the secrets the configuration makes the process
// read: the model's API key; the variables MCP servers' headers,
// arguments and URLs name with ${env:NAME}; and
// the variables passed to MCP servers and plugins whose names say they
// hold a credential. A configuration that does not parse registers what
// it can; its error is reported where it is used.
func (cfg *Config) holdSecrets() {
	if cfg.Model.Provider != "scripted" {
		env := cfg.Model.APIKeyEnv
		if env == "" {
			env = defaultKeyEnv(cfg.Model.Provider)
		}
		holdEnv(env)
		for _, o := range cfg.Model.Overrides {
			if o.Provider == "" {
				continue
			}
			env := o.APIKeyEnv
			if env == "" {
				env = defaultKeyEnv(o.Provider)
			}
			holdEnv(env)
		}
	}
	if entries, err := cfg.mcpEntries(); err == nil {
		for _, e := range entries { // an invalid server's too: its names are
			for _, n := range append(e.sc.HeaderEnv(), e.sc.ArgEnv()...) {
				holdEnv(n)
			}
			holdSecretNamed(e.sc.Env)
		}
	}
	if pcs, err := cfg.pluginConfigs(); err == nil {
		for _, pc := range pcs {
			holdSecretNamed(pc.Env)
		}
	}
}

// defaultKeyEnv is the API key variable a provider reads when
// api_key_env is unset.
func defaultKeyEnv(provider string) string {
	if provider == anthropic.Name {
		return anthropic.DefaultAPIKeyEnv
	}
	return openai.DefaultAPIKeyEnv
}

// holdEnv registers the value of an environment variable.
func holdEnv(name string) {
	if isEnvName(name) {
		heldSecrets.Add(os.Getenv(name))
	}
}

// holdSecretNamed registers the values of the variables whose names say
// they hold a credential (GITHUB_TOKEN, DB_PASSWORD, X_API_KEY, ...);
// PATH or HOME are not secrets, and redacting them would mangle output.
func holdSecretNamed(names []string) {
	for _, n := range names {
		u := strings.ToUpper(n)
		for _, w := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "ACCESS_KEY", "PRIVATE_KEY", "CREDENTIAL", "AUTH"} {
			if strings.Contains(u, w) {
				holdEnv(n)
				break
			}
		}
	}
}
