package wasm

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/internal/config"
)

// Limits a module gets when neither its manifest nor the operator says
// otherwise. The operator's grant is the ceiling; the manifest's request
// is what the tool gets, up to that ceiling.
const (
	DefaultMemoryMB       = 64
	DefaultTimeout        = 10 * time.Second
	DefaultMaxOutputBytes = 1 << 20
	// MaxMemoryMB is the largest memory a module can be granted: 4 GiB,
	// all a 32-bit WebAssembly memory can address.
	MaxMemoryMB = 4096
)

// DefaultMaxConcurrency is a module's max_concurrency when none is set:
// twice the CPUs Go may use, at least 4. Guests compute; more of them at
// once than cores only makes every one of them later.
func DefaultMaxConcurrency() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// HostConfig configures a Host. The zero value is ready to use.
type HostConfig struct {
	// CacheDir holds compiled modules between runs (created 0700). Empty
	// means DefaultCacheDir().
	CacheDir string
	// Logger receives cache repairs, pool refill failures and other events
	// that are not a call's result. Nil discards them.
	Logger hclog.Logger
	// MemoryBudgetMB caps the host memory all instances hold at once:
	// each counts its memory_mb while it exists and, while it serves a
	// call, the call stacks wazero may allocate outside it (160 MiB). Calls
	// over the budget wait in line (see tool.Queue). Zero means
	// DefaultMemoryBudgetMB().
	MemoryBudgetMB int
	// MaxRunning caps the calls, of all modules, whose guests run at
	// once; more wait in line (see tool.Queue). Zero means
	// DefaultMaxRunning().
	MaxRunning int
	// Compiling, when set, is called as a module starts compiling (into
	// the cache, or out of it) with the module's name; the function it
	// returns is called when that ends. A compilation the cache does not
	// hold takes a minute or more on a small machine: the CLI shows a
	// status line while it lasts (internal/progress).
	Compiling func(module string) (done func())
}

// ModuleConfig is one entry of kernel.yaml's tools.wasm list: a module the
// operator allows, pinned or not, and the capabilities granted to it.
type ModuleConfig struct {
	// Name is the module's name in tool sources ("wasm:<name>") and logs.
	// Empty means the manifest's name.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Path is the .wasm file; its manifest is tool.json in the same
	// directory. The caller resolves relative paths (kernel.yaml: against
	// the config file's directory); Load uses the path as given.
	Path string `yaml:"path" json:"path"`
	// SHA256 pins the module: if set, Load refuses a file with another
	// hash (lowercase or uppercase hex).
	SHA256 string `yaml:"sha256,omitempty" json:"sha256,omitempty"`
	// Pool is how many initialised instances of a reactor module are kept
	// ready. Each is used for exactly one call. Zero instantiates on demand.
	// Only reactor modules can be pooled.
	Pool int `yaml:"pool,omitempty" json:"pool,omitempty"`
	// MaxConcurrency caps the calls of the module's tools that run at
	// once; more wait in line (see tool.Queue). Zero
	// means DefaultMaxConcurrency().
	MaxConcurrency int `yaml:"max_concurrency,omitempty" json:"max_concurrency,omitempty"`
	// Warm loads the module in the background right after start instead
	// of on its first call (then the pool, if any, fills).
	Warm bool `yaml:"warm,omitempty" json:"warm,omitempty"`
	// Grants are the capabilities the operator allows. Anything not
	// granted is denied.
	Grants Grants `yaml:"grants,omitempty" json:"grants,omitempty"`
}

// Grants are what the operator allows a module. A module gets the
// intersection of this and what its manifest requests.
type Grants struct {
	// FS maps guest directories to host directories.
	FS []FSGrant `yaml:"fs,omitempty" json:"fs,omitempty"`
	// Env gives values to environment variables the manifest requests.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Clock grants the real wall and monotonic clocks and real sleeping.
	// Without it the guest sees wazero's fake clock (a fixed epoch, 1 ms
	// per reading) and sleeping returns at once.
	Clock bool `yaml:"clock,omitempty" json:"clock,omitempty"`
	// Random grants crypto/rand. Without it random_get is a deterministic
	// stream (fixed seed), the same for every call.
	Random bool `yaml:"random,omitempty" json:"random,omitempty"`
	// MemoryMB caps linear memory. Zero means DefaultMemoryMB.
	MemoryMB int `yaml:"memory_mb,omitempty" json:"memory_mb,omitempty"`
	// Timeout caps one call. Zero means DefaultTimeout.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// MaxOutputBytes caps stdout and stderr each. Zero means
	// DefaultMaxOutputBytes.
	MaxOutputBytes int `yaml:"max_output_bytes,omitempty" json:"max_output_bytes,omitempty"`
}

// FSGrant mounts a host directory at a guest path.
type FSGrant struct {
	// Guest is an absolute, clean guest path, e.g. /data.
	Guest string `yaml:"guest" json:"guest"`
	// Host is the host directory. The caller resolves relative paths.
	Host string `yaml:"host" json:"host"`
	// Mode is "ro" or "rw". Empty means "ro".
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("5s",
// "1m30s") in YAML and JSON: the one type of internal/config.
type Duration = config.Duration

// DefaultCacheDir is $XDG_CACHE_HOME/agentkernel/wasm, or
// ~/.cache/agentkernel/wasm when XDG_CACHE_HOME is not set.
func DefaultCacheDir() (string, error) {
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		if !filepath.IsAbs(x) {
			return "", fmt.Errorf("XDG_CACHE_HOME %q is not an absolute path", x)
		}
		return filepath.Join(x, "agentkernel", "wasm"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the WASM cache directory: %w", err)
	}
	return filepath.Join(home, ".cache", "agentkernel", "wasm"), nil
}

// ErrConfig marks a module configuration the operator must fix.
var ErrConfig = errors.New("invalid WASM module configuration")

// validate checks the fields that do not need the manifest.
func (c *ModuleConfig) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if c.Path == "" {
		return bad("path", "is required (the .wasm file; tool.json must be beside it)")
	}
	if c.SHA256 != "" {
		if _, err := config.ParsePin(c.SHA256); err != nil {
			return bad("sha256", "%v", err)
		}
	}
	if c.Pool < 0 || c.Pool > 64 {
		return bad("pool", "%d is not between 0 and 64", c.Pool)
	}
	if c.MaxConcurrency < 0 || c.MaxConcurrency > 1024 {
		return bad("max_concurrency", "%d is not between 0 and 1024", c.MaxConcurrency)
	}
	g := &c.Grants
	seen := map[string]bool{}
	for i, m := range g.FS {
		field := fmt.Sprintf("grants.fs[%d]", i)
		if err := checkGuestPath(m.Guest); err != nil {
			return bad(field+".guest", "%v", err)
		}
		if seen[m.Guest] {
			return bad(field+".guest", "%s is granted twice", m.Guest)
		}
		seen[m.Guest] = true
		if m.Host == "" {
			return bad(field+".host", "is required (the host directory to mount at %s)", m.Guest)
		}
		if m.Mode != "" && m.Mode != "ro" && m.Mode != "rw" {
			return bad(field+".mode", "%q is not ro or rw", m.Mode)
		}
	}
	for k := range g.Env {
		if !config.ValidEnvName(k) {
			return bad("grants.env", "%q is not a valid environment variable name", k)
		}
	}
	if g.MemoryMB < 0 || g.MemoryMB > MaxMemoryMB {
		return bad("grants.memory_mb", "%d is not between 1 and %d", g.MemoryMB, MaxMemoryMB)
	}
	if g.Timeout < 0 {
		return bad("grants.timeout", "%s is negative", g.Timeout)
	}
	if g.MaxOutputBytes < 0 {
		return bad("grants.max_output_bytes", "%d is negative", g.MaxOutputBytes)
	}
	return nil
}

// checkGuestPath accepts absolute, clean paths other than "/".
func checkGuestPath(p string) error {
	switch {
	case p == "":
		return errors.New("is required (an absolute guest path such as /data)")
	case p[0] != '/':
		return fmt.Errorf("%q is not absolute", p)
	case p == "/":
		return errors.New("\"/\" cannot be a mount; use a directory such as /data")
	case path.Clean(p) != p:
		return fmt.Errorf("%q is not clean (want %s)", p, path.Clean(p))
	}
	return nil
}
