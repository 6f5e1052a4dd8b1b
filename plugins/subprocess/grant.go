package subprocess

import (
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/sandbox"
)

// PluginGrant is the sandbox grant a plugin runs under: its private
// copy exe read-only (the binary, or an interpreted plugin's copied
// directory, plus its interpreter and the interpreter's lib directory),
// go-plugin's socket directory read-write, the system library directories
// read-only (a dynamically linked plugin must start), plus cfg.Sandbox.
// The environment is cfg.Env. Nothing else: no home directory, no store,
// no network unless cfg.Sandbox grants it.
func PluginGrant(cfg PluginConfig, exe, socketDir string) sandbox.Grant {
	g := cfg.Sandbox
	fs := append(sandbox.LibraryDirs(), sandbox.FSRule{Path: exe, Mode: "ro"})
	if cfg.Interpreter != nil {
		fs = append(fs, interpreterFS(cfg.Interpreter)...)
	}
	if socketDir != "" {
		fs = append(fs, sandbox.FSRule{Path: socketDir, Mode: "rw"})
	}
	g.FS = append(fs, g.FS...)
	g.Env = slices.Clone(cfg.Env)
	g.AllowMissing = slices.Clone(g.AllowMissing)
	return g
}

// envValue returns the value of name in env (NAME=value entries).
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}
