package subprocess

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/config/names"
	"github.com/agentkernel/agentkernel/internal/supervise"
	"github.com/agentkernel/agentkernel/sandbox"
)

// PluginConfig configures one subprocess plugin: an entry of the
// tools.plugins list in kernel.yaml. The zero value of every optional field
// means the documented default.
type PluginConfig struct {
	// Name namespaces the plugin's tools ("name.tool") and names it in logs
	// and errors: 1–32 characters of [a-z0-9_-], starting with a letter.
	Name string `yaml:"name" json:"name"`
	// Path is the plugin binary, or with Interpreter the plugin's script.
	// Relative paths are relative to the kernel's working directory.
	Path string `yaml:"path" json:"path"`
	// SHA256 pins the binary: 64 hex digits. Required; there is no way to
	// skip the check. A missing or wrong pin is refused with an error that
	// prints the actual sha256. With Interpreter it pins the lock of the
	// script's directory (LockFile), which pins every file in it.
	SHA256 string `yaml:"sha256" json:"sha256"`
	// Interpreter, when set, makes this an interpreted plugin: the host
	// runs Interpreter.Path with Interpreter.Args, the script Path and
	// Args. What runs is what was pinned: the host copies the files the
	// lock lists, checking each one's sha256 as it copies it, and runs the
	// copy; the interpreter is named by absolute path (and, optionally,
	// pinned by its own sha256).
	Interpreter *Interpreter `yaml:"interpreter,omitempty" json:"interpreter,omitempty"`
	// Args are passed to the plugin on its command line.
	Args []string `yaml:"args,omitempty" json:"args,omitempty"`
	// Env lists the names of the kernel's environment variables the plugin
	// may see. Nothing else is inherited: the plugin's environment is these
	// variables (those that are set) plus go-plugin's handshake variables.
	Env []string `yaml:"env,omitempty" json:"env,omitempty"`
	// Dir is the plugin's working directory; empty means the kernel's.
	Dir string `yaml:"dir,omitempty" json:"dir,omitempty"`
	// Timeout bounds one call of any of the plugin's tools and overrides
	// the timeouts the tools declare. Zero means the tool's own timeout, or
	// the kernel's default when it declares none. A call still running at
	// its deadline takes the plugin down with it: the host kills the
	// plugin's process group, and the next call starts it again.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// MaxOutputBytes caps a result's content (default 256 KiB, at most
	// 64 MiB). Longer output is cut and ends with a marker line.
	MaxOutputBytes int `yaml:"max_output_bytes,omitempty" json:"max_output_bytes,omitempty"`
	// Restart says how a crashed plugin is restarted.
	Restart RestartPolicy `yaml:"restart,omitempty" json:"restart,omitempty"`
	// Start is "lazy" (the default: the plugin starts on its first call, or
	// at Load when its tool list is not cached yet) or "eager" (at Load).
	Start StartMode `yaml:"start,omitempty" json:"start,omitempty"`
	// Sandbox is the plugin's grant (package sandbox). The plugin always
	// gets its private binary read-only, go-plugin's socket directory
	// read-write and the system library directories read-only (see
	// PluginGrant); everything else, network included, only if granted
	// here. Its env is ignored: Env is the allowlist.
	Sandbox sandbox.Grant `yaml:"sandbox,omitempty" json:"sandbox,omitempty"`
}

// Interpreter is the program that runs an interpreted plugin's script:
// node for a plugin written with sdk/typescript, python3 for sdk/python.
type Interpreter struct {
	// Path is the interpreter's absolute path (`command -v node` prints
	// it): what runs must not depend on PATH. It must be a binary (not a
	// script) that only its owner, root or the kernel's user, can write.
	Path string `yaml:"path" json:"path"`
	// SHA256, if set, pins the interpreter's file as SHA256 pins a plugin
	// binary. Optional: a package upgrade changes it, and the interpreter's
	// own library (its standard modules) is not pinned either way.
	SHA256 string `yaml:"sha256,omitempty" json:"sha256,omitempty"`
	// Args go on the interpreter's command line before the script.
	Args []string `yaml:"args,omitempty" json:"args,omitempty"`

	// exec is the file the host executes: Path with its symbolic links
	// resolved, once checked (checkInterpreter).
	exec string
}

// RestartPolicy configures supervision (internal/supervise, shared with
// the MCP host): consecutive crashes before the circuit opens, the
// backoff, the cooldown.
type RestartPolicy = supervise.RestartPolicy

// StartMode says when a plugin process starts.
type StartMode string

// The start modes. The empty string means StartLazy.
const (
	StartLazy  StartMode = "lazy"
	StartEager StartMode = "eager"
)

// The defaults and limits of PluginConfig.
const (
	DefaultMaxOutputBytes = 256 << 10
	MaxMaxOutputBytes     = 64 << 20
	DefaultMaxCrashes     = supervise.DefaultMaxCrashes
	DefaultBackoff        = supervise.DefaultBackoff
	DefaultCooldown       = supervise.DefaultCooldown
	// StartTimeout bounds a plugin's start: exec, handshake and Describe.
	StartTimeout = 10 * time.Second
)

// Validate checks the configuration without touching the binary. Errors are
// *ConfigError values naming the plugin and the field.
func (c PluginConfig) Validate() error {
	_, err := c.normalize()
	return err
}

// normalize validates c and returns it with defaults filled in and the pin
// in lower case. An empty pin is allowed here: Load and Verify refuse it
// with the binary's actual hash.
func (c PluginConfig) normalize() (PluginConfig, error) {
	name := c.Name
	bad := func(field, format string, args ...any) (PluginConfig, error) {
		return PluginConfig{}, pluginError(name, field, fmt.Errorf(format, args...))
	}
	if err := names.Namespace.Check(c.Name); err != nil {
		return bad("name", "%v", err)
	}
	if strings.TrimSpace(c.Path) == "" {
		if c.Interpreter != nil {
			return bad("path", "is required (the plugin's script)")
		}
		return bad("path", "is required (the plugin binary)")
	}
	if c.Interpreter != nil {
		in, err := c.Interpreter.normalize()
		if err != nil {
			return bad(err.Field, "%w", err.Err)
		}
		c.Interpreter = in
	}
	if strings.TrimSpace(c.SHA256) != "" {
		pin, err := config.ParsePin(c.SHA256)
		if err != nil {
			return bad("sha256", "%v (compute it with `sha256sum %s`)", err, c.Path)
		}
		c.SHA256 = pin
	} else {
		c.SHA256 = ""
	}
	if fe := config.CheckEnvList("env", c.Env, handshakeEnv); fe != nil {
		return bad(fe.Field, "%w", fe.Err)
	}
	if c.Timeout < 0 {
		return bad("timeout", "must not be negative")
	}
	if err := c.Sandbox.Validate(); err != nil {
		var ge *sandbox.GrantError
		if errors.As(err, &ge) {
			return bad("sandbox."+ge.Field, "%s", ge.Msg)
		}
		return bad("sandbox", "%v", err)
	}
	switch {
	case c.MaxOutputBytes < 0 || c.MaxOutputBytes > MaxMaxOutputBytes:
		return bad("max_output_bytes", "%d is outside 0..%d", c.MaxOutputBytes, MaxMaxOutputBytes)
	case c.MaxOutputBytes == 0:
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	r, err := c.Restart.Normalize()
	if err != nil {
		return bad(err.Field, "%w", err.Err)
	}
	c.Restart = r
	switch c.Start {
	case "":
		c.Start = StartLazy
	case StartLazy, StartEager:
	default:
		return bad("start", "%q is not \"lazy\" or \"eager\"", c.Start)
	}
	return c, nil
}

// normalize checks the interpreter entry without touching its file and
// returns a copy with the pin in lower case.
func (in *Interpreter) normalize() (*Interpreter, *config.Error) {
	out := *in
	out.Args = slices.Clone(in.Args)
	switch {
	case strings.TrimSpace(in.Path) == "":
		return nil, config.Errorf("interpreter.path", "is required: the interpreter's absolute path, e.g. /usr/bin/node or /usr/bin/python3")
	case !filepath.IsAbs(in.Path):
		return nil, config.Errorf("interpreter.path", "%q is not an absolute path: name the interpreter by its absolute path (`command -v %s` prints it), so that what runs does not depend on PATH", in.Path, in.Path)
	}
	out.Path = filepath.Clean(in.Path)
	if strings.TrimSpace(in.SHA256) != "" {
		pin, err := config.ParsePin(in.SHA256)
		if err != nil {
			return nil, config.Errorf("interpreter.sha256", "%v (compute it with `sha256sum %s`)", err, in.Path)
		}
		out.SHA256 = pin
	} else {
		out.SHA256 = ""
	}
	return &out, nil
}

// Duration is a time.Duration written as a Go duration string ("30s",
// "1m30s") in YAML and JSON: the one type of internal/config, which the
// sandbox grant uses too.
type Duration = config.Duration

// handshakeEnv reserves go-plugin's handshake variables.
func handshakeEnv(name string) string {
	if strings.HasPrefix(name, "PLUGIN_") || name == "AGENTKERNEL_PLUGIN" {
		return "the go-plugin handshake"
	}
	return ""
}
