package mcp

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/config/names"
	"github.com/agentkernel/agentkernel/internal/supervise"
	"github.com/agentkernel/agentkernel/kernel"
	toolpkg "github.com/agentkernel/agentkernel/tool"
)

// ServerConfig configures one MCP server: an entry of the tools.mcp list in
// kernel.yaml. Exactly one of Command (a stdio server the kernel starts) and
// URL (a streamable HTTP server) is set. The zero value of every optional
// field means the documented default.
type ServerConfig struct {
	// Name namespaces the server's tools ("name.tool"): 1–32 characters of
	// [a-z0-9_-], starting with a letter.
	Name string `yaml:"name" json:"name"`
	// Command is the stdio server's argv. "{workspace}" in any element is
	// replaced by the kernel's workspace directory, and "${env:NAME}" in
	// an argument (not the program) by the kernel's environment variable
	// NAME, which must be set: how a credential the server takes as an
	// argument (--token ...) stays out of the file.
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
	// Env lists the names of the kernel's environment variables the server
	// process may see; nothing else is inherited.
	Env []string `yaml:"env,omitempty" json:"env,omitempty"`
	// Dir is the stdio server's working directory (default the workspace).
	Dir string `yaml:"dir,omitempty" json:"dir,omitempty"`
	// Grant is the sandbox manifest that confines a stdio server (see
	// docs/sandbox.md). It is kept as written and handed to the sandbox
	// launcher.
	Grant yaml.Node `yaml:"grant,omitempty" json:"-"`
	// URL is a streamable HTTP server's endpoint; "${env:NAME}" in it
	// (a credential in the query, ?api_key=${env:NAME}) is replaced by the
	// kernel's environment variable NAME, which must be set.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
	// Headers are sent with every HTTP request; "${env:NAME}" in a value is
	// replaced by the kernel's environment variable NAME (which must be set).
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Tools, when set, is the allowlist of the server's tools (names as the
	// server spells them) the kernel registers; the others are ignored.
	Tools []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// Tiers set the tier of tools by their server name. The server's
	// annotations are hints shown by `kernel mcp ls`, never trusted: a tool
	// without an entry gets DefaultTier.
	Tiers map[string]kernel.Tier `yaml:"tiers,omitempty" json:"tiers,omitempty"`
	// DefaultTier is the tier of tools Tiers does not name (default
	// side_effecting: an unknown tool runs alone and policy treats it as
	// able to change things; set privileged for a server you trust less).
	DefaultTier kernel.Tier `yaml:"default_tier,omitempty" json:"default_tier,omitempty"`
	// Timeout bounds one call of any of the server's tools (default: the
	// kernel's tool timeout). At the deadline the kernel sends
	// notifications/cancelled and the call fails.
	Timeout config.Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// StartTimeout bounds connecting: starting the process or reaching the
	// URL, and the initialize handshake (default 30s).
	StartTimeout config.Duration `yaml:"start_timeout,omitempty" json:"start_timeout,omitempty"`
	// MaxOutputBytes caps a result's content (default 256 KiB).
	MaxOutputBytes int `yaml:"max_output_bytes,omitempty" json:"max_output_bytes,omitempty"`
	// MaxSchemaBytes caps a tool's inputSchema (default 64 KiB); a tool
	// with a larger one is reported and left out.
	MaxSchemaBytes int `yaml:"max_schema_bytes,omitempty" json:"max_schema_bytes,omitempty"`
	// Restart says how a crashed stdio server is restarted, as for plugins.
	Restart supervise.RestartPolicy `yaml:"restart,omitempty" json:"restart,omitempty"`
}

// The defaults of ServerConfig.
const (
	DefaultTier           = kernel.TierSideEffecting
	DefaultMaxOutputBytes = 256 << 10
	DefaultMaxSchemaBytes = 64 << 10
	DefaultStartTimeout   = config.Duration(30 * time.Second)
)

var envRefRE = regexp.MustCompile(`\$\{env:([^}]*)\}`)

// ConfigError is a problem in one server's configuration (internal/config's
// Error, the kernel's one configuration error): Kind "mcp server", Name
// the server's name, Field the field under the server.
type ConfigError = config.Error

// tierNames lists the tiers (tool.Tiers) for messages.
func tierNames() string {
	var names []string
	for _, t := range toolpkg.Tiers() {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}

// serverError is a *ConfigError about field of the server called name.
func serverError(name, field string, err error) *ConfigError {
	return &ConfigError{Kind: "mcp server", Name: name, Field: field, Err: err}
}

// Validate checks c without starting anything.
func (c ServerConfig) Validate() error {
	_, err := c.normalize("")
	return err
}

// Normalize validates c and returns it as the host runs it: defaults set,
// {workspace} expanded and the working directory defaulted to workspace
// (what StdioGrant expects).
func (c ServerConfig) Normalize(workspace string) (ServerConfig, error) {
	return c.normalize(workspace)
}

// normalize validates c and returns it with defaults set and {workspace}
// expanded.
func (c ServerConfig) normalize(workspace string) (ServerConfig, error) {
	bad := func(field, format string, args ...any) (ServerConfig, error) {
		return ServerConfig{}, serverError(c.Name, field, fmt.Errorf(format, args...))
	}
	if err := names.Namespace.Check(c.Name); err != nil {
		return bad("name", "%v", err)
	}
	switch {
	case len(c.Command) == 0 && c.URL == "":
		return bad("command", "set command (a stdio server) or url (a streamable HTTP server)")
	case len(c.Command) > 0 && c.URL != "":
		return bad("url", "set command or url, not both")
	case len(c.Command) > 0 && strings.TrimSpace(c.Command[0]) == "":
		return bad("command[0]", "is empty")
	}
	if len(c.Command) > 0 && envRefRE.MatchString(c.Command[0]) {
		return bad("command[0]", "names its program with ${env:...}: write the program's path (its files are checked and protected; ${env:NAME} is for arguments)")
	}
	for i, a := range c.Command {
		for _, m := range envRefRE.FindAllStringSubmatch(a, -1) {
			if !config.ValidEnvName(m[1]) {
				return bad(fmt.Sprintf("command[%d]", i), "%q is not an environment variable name in ${env:NAME}", m[1])
			}
		}
	}
	for _, m := range envRefRE.FindAllStringSubmatch(c.URL, -1) {
		if !config.ValidEnvName(m[1]) {
			return bad("url", "%q is not an environment variable name in ${env:NAME}", m[1])
		}
	}
	if c.URL != "" {
		u, err := url.Parse(envRefRE.ReplaceAllString(c.URL, "x"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("url", "%q is not an http(s) URL", c.URL)
		}
		if len(c.Env) > 0 {
			return bad("env", "is for stdio servers (command); an HTTP server's process is not the kernel's")
		}
		if !c.Grant.IsZero() {
			return bad("grant", "is for stdio servers (command); an HTTP server's process is not the kernel's")
		}
	}
	if len(c.Headers) > 0 && c.URL == "" {
		return bad("headers", "are for HTTP servers (url)")
	}
	for k, v := range c.Headers {
		for _, m := range envRefRE.FindAllStringSubmatch(v, -1) {
			if !config.ValidEnvName(m[1]) {
				return bad("headers."+k, "%q is not an environment variable name in ${env:NAME}", m[1])
			}
		}
	}
	if fe := config.CheckEnvList("env", c.Env, nil); fe != nil {
		return bad(fe.Field, "%w", fe.Err)
	}
	for name, t := range c.Tiers {
		if !t.Valid() {
			return bad("tiers."+name, "%q is not one of %s", t, tierNames())
		}
	}
	switch {
	case c.DefaultTier == "":
		c.DefaultTier = DefaultTier
	case !c.DefaultTier.Valid():
		return bad("default_tier", "%q is not one of %s", c.DefaultTier, tierNames())
	}
	switch {
	case c.Timeout < 0:
		return bad("timeout", "must not be negative")
	case c.StartTimeout < 0:
		return bad("start_timeout", "must not be negative")
	case c.MaxOutputBytes < 0:
		return bad("max_output_bytes", "must not be negative")
	case c.MaxSchemaBytes < 0:
		return bad("max_schema_bytes", "must not be negative")
	}
	config.Default(&c.StartTimeout, DefaultStartTimeout)
	config.Default(&c.MaxOutputBytes, DefaultMaxOutputBytes)
	config.Default(&c.MaxSchemaBytes, DefaultMaxSchemaBytes)
	r, fe := c.Restart.Normalize()
	if fe != nil {
		return bad(fe.Field, "%w", fe.Err)
	}
	c.Restart = r
	if workspace != "" {
		argv := make([]string, len(c.Command))
		for i, a := range c.Command {
			argv[i] = strings.ReplaceAll(a, "{workspace}", workspace)
		}
		c.Command = argv
		if c.Dir == "" && len(c.Command) > 0 {
			c.Dir = workspace
		}
	}
	return c, nil
}

// HeaderEnv lists the environment variables the headers name with
// ${env:NAME}: what they send is a credential the kernel holds.
func (c ServerConfig) HeaderEnv() []string {
	var out []string
	for _, v := range c.Headers {
		for _, m := range envRefRE.FindAllStringSubmatch(v, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// ArgEnv lists the environment variables the command's arguments and the
// URL name with ${env:NAME}: what they send is a credential the kernel
// holds.
func (c ServerConfig) ArgEnv() []string {
	var out []string
	for _, v := range append(slices.Clone(c.Command), c.URL) {
		for _, m := range envRefRE.FindAllStringSubmatch(v, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// expandEnv replaces ${env:NAME} in v with the kernel's variable NAME;
// missing names the first one that is not set.
func expandEnv(v string) (out, missing string) {
	out = envRefRE.ReplaceAllStringFunc(v, func(m string) string {
		name := envRefRE.FindStringSubmatch(m)[1]
		val, ok := os.LookupEnv(name)
		if !ok && missing == "" {
			missing = name
		}
		return val
	})
	return out, missing
}

// unsetEnv is the error of a ${env:NAME} whose variable is not set, named
// as ${env:NAME}: a variable's name is no secret, and this form survives
// the scrubber that error text goes through.
func (c ServerConfig) unsetEnv(field, name, what string) error {
	return serverError(c.Name, field, fmt.Errorf("${env:%s} is not set: export %s before starting the kernel (%s)", name, name, what))
}

// headers expands ${env:NAME} in the configured headers; an unset variable
// is an error naming it.
func (c ServerConfig) headers() (map[string]string, error) {
	out := make(map[string]string, len(c.Headers))
	for k, v := range c.Headers {
		val, missing := expandEnv(v)
		if missing != "" {
			return nil, c.unsetEnv("headers."+k, missing, "the header is sent with its value")
		}
		out[k] = val
	}
	return out, nil
}

// endpoint is the URL with ${env:NAME} expanded.
func (c ServerConfig) endpoint() (string, error) {
	u, missing := expandEnv(c.URL)
	if missing != "" {
		return "", c.unsetEnv("url", missing, "the URL is requested with its value")
	}
	return u, nil
}

// Argv is the command the kernel starts c's server with: ${env:NAME} in
// its arguments replaced by the kernel's variables (an unset one is an
// error naming it). {workspace} is the host's to expand (Normalize).
func (c ServerConfig) Argv() ([]string, error) {
	x, err := c.expandCommand()
	return x.Command, err
}

// expandCommand returns c with ${env:NAME} in its arguments expanded: the
// argv the server runs with.
func (c ServerConfig) expandCommand() (ServerConfig, error) {
	argv := slices.Clone(c.Command)
	for i, a := range argv {
		v, missing := expandEnv(a)
		if missing != "" {
			return c, c.unsetEnv(fmt.Sprintf("command[%d]", i), missing, "the server gets its value as this argument")
		}
		argv[i] = v
	}
	c.Command = argv
	return c, nil
}

// allowed reports whether the server's tool name is in the allowlist.
func (c ServerConfig) allowed(name string) bool {
	if len(c.Tools) == 0 {
		return true
	}
	for _, t := range c.Tools {
		if t == name {
			return true
		}
	}
	return false
}
