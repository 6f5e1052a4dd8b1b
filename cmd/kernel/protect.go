package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/internal/hostpath"
	"github.com/agentkernel/agentkernel/plugins/mcp"
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
	// startCheck: the kernel refuses to start while a tool could write it
	// (every file it reads; not the discovery paths it did not read).
	startCheck bool
	// owner is the native tool whose command names the file ("mcp:NAME"),
	// whose own grant may cover it: a server that can rewrite its own
	// script gains nothing it does not have (a data file it writes is often
	// named on its command line).
	owner string
}

// writableArea is a directory a tool can write, and who can.
type writableArea struct {
	dir   string // absolute
	by    string // "the workspace (write_file, edit_file, run_command)", ...
	owner string // the native tool whose grant this is ("mcp:NAME"), or ""
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
// grant: run_command's command_sandbox, each command tool's sandbox
// (tools.command), each plugin's sandbox, each MCP
// stdio server's grant and each command hook's sandbox (the workspace
// itself is builtinWritable's).
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
			out = append(out, writableArea{dir: p, by: "plugin " + pc.Name + "'s sandbox grant", owner: "plugin:" + pc.Name})
		}
	}
	dc, err := cfg.declaredConfig()
	if err != nil {
		return nil, err
	}
	for _, c := range dc.Command {
		for _, p := range c.Sandbox.WritablePaths() {
			out = append(out, writableArea{dir: p, by: "command tool " + c.Name + "'s sandbox grant (tools.command)"})
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
			out = append(out, writableArea{dir: p, by: "MCP server " + sc.Name + "'s sandbox grant", owner: "mcp:" + sc.Name})
		}
	}
	hc, err := cfg.hooksConfig()
	if err != nil {
		return nil, err
	}
	for _, r := range hc.Rules {
		if r.Command == nil {
			continue
		}
		for _, p := range r.Command.Sandbox.WritablePaths() {
			out = append(out, writableArea{dir: cfg.path(p), by: "hook " + r.Name + "'s sandbox grant", owner: "hook:" + r.Name})
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
// Every one is refused by the built-in write tools; those with startCheck
// also make the kernel refuse to start when a tool could write them.
func (cfg *Config) protectedFiles() ([]protectedFile, error) {
	var out []protectedFile
	owned := func(p, what, owner string) {
		if p != "" {
			out = append(out, protectedFile{path: cfg.path(p), what: what, startCheck: true, owner: owner})
		}
	}
	add := func(p, what string) { owned(p, what, "") }
	for _, f := range cfg.files {
		add(f, "a configuration layer")
	}
	// The files discovery would read, present or not: a tool that creates
	// one would configure the next kernel started there. They are refused
	// to the write tools; one that exists and is read is a layer above.
	for _, l := range configLayers(nil) {
		if p, err := filepath.Abs(l.Path); err == nil {
			out = append(out, protectedFile{path: p, what: "a configuration file the kernel discovers (" + l.Kind + ")"})
		}
	}
	add(cfg.Model.Catalog, "the model catalog (model.catalog)")
	if pc, err := cfg.policyConfig(); err == nil {
		add(pc.File, "the policy")
		add(pc.DecisionLog, "the decision log")
		if pc.File != "" && !cfg.policyNoCache {
			// An entry there lets a policy load without its tests.
			add(filepath.Join(cacheDir(), "policy"), "the policy test cache")
		}
	} else {
		return nil, err
	}
	if sc, err := cfg.storeConfig(); err == nil && sc.Kind != "memory" && sc.Kind != "postgres" {
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
		if r.Command != nil {
			for _, f := range hooks.CommandFiles(r.Command, cfg.hooksOptions()) {
				owned(f, "a file the command of hook "+r.Name+" runs", "hook:"+r.Name)
			}
		}
	}
	pcs, err := cfg.pluginConfigs()
	if err != nil {
		return nil, err
	}
	for _, pc := range pcs {
		if pc.Interpreter != nil {
			// An interpreted plugin: every file its lock may list.
			add(filepath.Dir(pc.Path), "the directory of plugin "+pc.Name)
			add(pc.Interpreter.Path, "the interpreter of plugin "+pc.Name)
		} else {
			add(pc.Path, "the binary of plugin "+pc.Name)
		}
		for _, f := range hostpath.Files(pc.Args, pc.Dir) {
			owned(f, "a file the arguments of plugin "+pc.Name+" name", "plugin:"+pc.Name)
		}
	}
	scs, err := cfg.mcpConfigs()
	if err != nil {
		return nil, err
	}
	for _, sc := range scs {
		for _, f := range mcp.ProgramFiles(sc, cfg.path(cfg.Workspace)) {
			owned(f, "a file the command of MCP server "+sc.Name+" runs", "mcp:"+sc.Name)
		}
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

// writableAreas are the directories tools can write under this
// configuration, from every writable source.
func (cfg *Config) writableAreas() ([]writableArea, error) {
	var areas []writableArea
	for _, src := range writableSources {
		a, err := src(cfg)
		if err != nil {
			return nil, err
		}
		areas = append(areas, a...)
	}
	return areas, nil
}

// writableBy returns the writable area that holds p, or a link on the way
// to p (hostpath.Locations), and that place; ok is false when tools can
// change neither p nor what p leads to. The areas of owner (a native
// tool's own grant) do not count.
func writableBy(p, owner string, areas []writableArea) (area writableArea, at string, ok bool) {
	for _, loc := range hostpath.Locations(p) {
		for _, a := range areas {
			if owner != "" && a.owner == owner {
				continue
			}
			if within(loc, realPath(a.dir)) {
				return a, loc, true
			}
		}
	}
	return writableArea{}, "", false
}

// checkProtected refuses a configuration in which a tool could change one
// of the kernel's own files, unless security.allow_writable names it, and
// one whose security.allow_writable comes from a file a tool could write.
func (cfg *Config) checkProtected() error {
	files, err := cfg.protectedFiles()
	if err != nil {
		return err
	}
	areas, err := cfg.writableAreas()
	if err != nil {
		return err
	}
	var errs []error
	// A layer a tool can write may not say what tools may write: that
	// would let the model opt its own rewrite in.
	for _, f := range cfg.allowSetBy {
		if a, at, ok := writableBy(f, "", areas); ok {
			errs = append(errs, fmt.Errorf("%s sets security.allow_writable, but %s is inside %s %s, so the model could write it: "+
				"a file tools can change may not say which kernel files tools may change. Set security.allow_writable in a configuration file "+
				"outside every writable directory (the user's file %s, or a --config file), and move this one out: %w",
				f, at, a.by, a.dir, cfg.userConfigHint(), ErrProtectedWritable))
		}
	}
	allowed := map[string]bool{}
	for _, p := range cfg.Security.AllowWritable {
		allowed[realPath(cfg.path(p))] = true
	}
	for _, f := range files {
		if !f.startCheck || allowed[realPath(f.path)] {
			continue
		}
		a, at, ok := writableBy(f.path, f.owner, areas)
		if !ok {
			continue
		}
		via := ""
		if real := realPath(f.path); at != real {
			via = " (through the symbolic link " + at + ")"
		}
		errs = append(errs, fmt.Errorf("%s: %s %s%s is inside %s %s, so the model could change it: %s, or accept the risk with security.allow_writable: [%s] in a configuration file outside that directory: %w",
			cfg.source(), f.what, f.path, via, a.by, a.dir, cfg.moveHint(f), f.path, ErrProtectedWritable))
	}
	return errors.Join(errs...)
}

// moveHint says how to take f out of the tools' reach.
func (cfg *Config) moveHint(f protectedFile) string {
	for _, l := range cfg.layers {
		if l.Kind == "project" && l.Found && realPath(l.Path) == realPath(f.path) {
			return "the kernel found it in the working directory (no --config): move it outside the workspace and name it with --config, or put it in the user's file " + cfg.userConfigHint()
		}
	}
	return "move it outside"
}

// userConfigHint is the user's configuration file, for messages.
func (cfg *Config) userConfigHint() string {
	if dir, err := userConfigDir(); err == nil {
		return filepath.Join(dir, userConfigRel)
	}
	return "~/.config/" + userConfigRel
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
func realPath(p string) string { return hostpath.Real(p) }

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}
