package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/plugins/builtin"
)

// SecurityConfig is the security section of kernel.yaml.
type SecurityConfig struct {
	// AllowWritable lists kernel files (config layers, policy, hook
	// scripts, plugin binaries, WASM modules, the store, the decision log)
	// the operator accepts to have inside a directory tools can write. The
	// kernel refuses to start otherwise. Built-in write tools refuse to
	// change these files all the same.
	AllowWritable []string `yaml:"allow_writable"`
}

// protectedFile is one of the kernel's own files: what changes the
// kernel's behaviour or records what it did.
type protectedFile struct {
	path string // absolute
	what string // "the policy", "config layer", ...
}

// writableArea is a directory a tool can write, and who can.
type writableArea struct {
	dir string // absolute
	by  string // "the workspace (write_file, edit_file, run_command)", ...
}

// writableSources are the ways tools get write access to host
// directories. Each returns the directories it opens for writing; the
// start-up check and hot reload consult all of them. A new source (the
// sandbox's read-write grants) is one more function here.
var writableSources = []func(*Config) ([]writableArea, error){
	(*Config).builtinWritable,
	(*Config).wasmWritable,
	(*Config).sandboxWritable,
}

// writeTools are the built-ins that can change files.
var writeTools = []string{"write_file", "edit_file", "run_command"}

// builtinWritable is the workspace when a built-in that writes is enabled.
func (cfg *Config) builtinWritable() ([]writableArea, error) {
	en := cfg.Tools.Builtin.Enable
	var writers []string
	for _, n := range writeTools {
		if en == nil || slices.Contains(en, n) {
			writers = append(writers, n)
		}
	}
	if len(writers) == 0 || cfg.Workspace == "" {
		return nil, nil
	}
	return []writableArea{{dir: cfg.path(cfg.Workspace), by: "the read-write workspace (" + strings.Join(writers, ", ") + ")"}}, nil
}

// sandboxWritable is every read-write path of a native process's sandbox
// grant: run_command's command_sandbox, each plugin's sandbox and each MCP
// stdio server's grant (the
// workspace itself is builtinWritable's).
func (cfg *Config) sandboxWritable() ([]writableArea, error) {
	var out []writableArea
	for _, p := range cfg.Tools.Builtin.CommandSandbox.WritablePaths() {
		out = append(out, writableArea{dir: cfg.path(p), by: "run_command's sandbox grant (tools.builtin.command_sandbox)"})
	}
	pcs, err := cfg.pluginConfigs()
	if err != nil {
		return nil, err
	}
	for _, pc := range pcs {
		for _, p := range pc.Sandbox.WritablePaths() {
			out = append(out, writableArea{dir: p, by: "plugin " + pc.Name + "'s sandbox grant"})
		}
	}
	scs, err := cfg.mcpConfigs()
	if err != nil {
		return nil, err
	}
	for _, sc := range scs {
		g, err := sc.ConfiguredGrant()
		if err != nil {
			return nil, err
		}
		for _, p := range g.WritablePaths() {
			out = append(out, writableArea{dir: p, by: "MCP server " + sc.Name + "'s sandbox grant"})
		}
	}
	return out, nil
}

// wasmWritable is every read-write directory mount of a WASM module.
func (cfg *Config) wasmWritable() ([]writableArea, error) {
	mcs, err := cfg.wasmConfigs()
	if err != nil {
		return nil, err
	}
	var out []writableArea
	for i, mc := range mcs {
		for j, g := range mc.Grants.FS {
			if g.Mode == "rw" {
				out = append(out, writableArea{dir: cfg.path(g.Host), by: fmt.Sprintf("a read-write WASM mount (tools.wasm[%d].grants.fs[%d], %s)", i, j, filepath.Base(mc.Path))})
			}
		}
	}
	return out, nil
}

// protectedFiles lists the kernel's own files for this configuration.
func (cfg *Config) protectedFiles() ([]protectedFile, error) {
	var out []protectedFile
	add := func(p, what string) {
		if p != "" {
			out = append(out, protectedFile{path: cfg.path(p), what: what})
		}
	}
	for _, f := range cfg.files {
		add(f, "a configuration layer")
	}
	if pc, err := cfg.policyConfig(); err == nil {
		add(pc.File, "the policy")
		add(pc.DecisionLog, "the decision log")
	} else {
		return nil, err
	}
	if sc, err := cfg.storeConfig(); err == nil && sc.Kind != "memory" {
		add(sc.Dir, "the session store")
	}
	if cfg.keysFile != "" {
		add(cfg.keysFile, "the API keys of kernel serve")
		add(cfg.keysFile+".lock", "the API keys' lock file")
	} else if p, err := cfg.keysPath(""); err == nil {
		add(p, "the API keys of kernel serve")
	}
	hc, err := cfg.hooksConfig()
	if err != nil {
		return nil, err
	}
	for _, r := range hc.Rules {
		if r.Command != nil && len(r.Command.Argv) > 0 && strings.ContainsRune(r.Command.Argv[0], '/') {
			add(r.Command.Argv[0], "the script of hook "+r.Name)
		}
	}
	pcs, err := cfg.pluginConfigs()
	if err != nil {
		return nil, err
	}
	for _, pc := range pcs {
		add(pc.Path, "the binary of plugin "+pc.Name)
	}
	mcs, err := cfg.wasmConfigs()
	if err != nil {
		return nil, err
	}
	for _, mc := range mcs {
		add(mc.Path, "a WASM module")
		add(filepath.Join(filepath.Dir(cfg.path(mc.Path)), "tool.json"), "a WASM manifest")
	}
	return out, nil
}

// ErrProtectedWritable is matched by the error of a kernel file that tools
// could write.
var ErrProtectedWritable = errors.New("a kernel file is writable by tools")

// checkProtected refuses a configuration in which a tool could change one
// of the kernel's own files, unless security.allow_writable names it.
func (cfg *Config) checkProtected() error {
	files, err := cfg.protectedFiles()
	if err != nil {
		return err
	}
	var areas []writableArea
	for _, src := range writableSources {
		a, err := src(cfg)
		if err != nil {
			return err
		}
		areas = append(areas, a...)
	}
	allowed := map[string]bool{}
	for _, p := range cfg.Security.AllowWritable {
		allowed[realPath(cfg.path(p))] = true
	}
	var errs []error
	for _, f := range files {
		real := realPath(f.path)
		if allowed[real] {
			continue
		}
		for _, a := range areas {
			if within(real, realPath(a.dir)) {
				errs = append(errs, fmt.Errorf("%s: %s %s is inside %s %s, so the model could change it: move it outside, or accept the risk with security.allow_writable: [%s]: %w",
					cfg.source(), f.what, f.path, a.by, a.dir, f.path, ErrProtectedWritable))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// protectedPaths are the kernel files the built-in write tools refuse.
func (cfg *Config) protectedPaths() []string {
	files, _ := cfg.protectedFiles() // errors surface in checkProtected
	out := make([]string, 0, len(files))
	for _, f := range files {
		out = append(out, f.path)
	}
	return out
}

// realPath is p with symbolic links resolved as far as it exists.
func realPath(p string) string { return builtin.RealPath(p) }

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}
