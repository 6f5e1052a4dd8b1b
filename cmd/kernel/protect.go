package main

import (
	"errors"
	"fmt"
	"os"
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
	// cache: the kernel's caches, which no grant may cover and
	// security.allow_writable cannot accept (cacheRefusal says why).
	cache bool
	// unresolved, with no path: a command whose shell script the kernel
	// cannot resolve (hostpath.ScriptError), refused while any tool but
	// owner can write anywhere.
	unresolved error
}

// kernelCaches are the caches the kernel keeps in cacheDir(), each a
// directory of entries it reads back as code or as a trusted decision,
// with the key that authenticates them (internal/cachemac).
var kernelCaches = []struct{ dir, what string }{
	{"wasm", "compiled WASM machine code, which the kernel maps and runs in its own unconfined process"},
	{"policy", "policy test verdicts and snapshots, which let a policy load without its tests"},
	{"mcp", "MCP servers' tool lists, offered to the model before a server starts"},
	{"plugins", "plugins' tool lists, offered to the model before a plugin starts, and the verified copies of plugin binaries, which the kernel executes"},
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
// (tools.command) and the workspace it always writes, each plugin's sandbox, each MCP
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
		// A command tool's grant is run_command's (builtin.CommandGrant):
		// the workspace read-write, whether or not a built-in writes.
		if cfg.Workspace != "" {
			out = append(out, writableArea{dir: cfg.path(cfg.Workspace), by: "the workspace, read-write to command tool " + c.Name + " (tools.command)", owner: "command:" + c.Name})
		}
		for _, p := range c.Sandbox.WritablePaths() {
			out = append(out, writableArea{dir: p, by: "command tool " + c.Name + "'s sandbox grant (tools.command)", owner: "command:" + c.Name})
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
	} else {
		return nil, err
	}
	// Every cache, whether this configuration uses it or not: a grant
	// over one today is a planted entry for tomorrow's configuration (the
	// entries' MACs are the second line).
	out = append(out, protectedFile{path: cacheDir(), what: "the kernel's caches", startCheck: true, cache: true})
	if sc, err := cfg.storeConfig(); err == nil && sc.Kind != "memory" && sc.Kind != "postgres" {
		add(sc.Dir, "the session store")
		if q, _, err := cfg.queueDir(); err == nil {
			add(q, "the steering queue (messages a run takes as the user's)")
		}
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
	unresolved := func(err error, what, owner string) {
		if err != nil {
			out = append(out, protectedFile{what: what, startCheck: true, owner: owner, unresolved: err})
		}
	}
	for _, r := range hc.Rules {
		if r.Command != nil {
			files, err := hooks.CommandFiles(r.Command, cfg.hooksOptions())
			for _, f := range files {
				owned(f, "a file the command of hook "+r.Name+" runs", "hook:"+r.Name)
			}
			unresolved(err, "the command of hook "+r.Name, "hook:"+r.Name)
		}
	}
	pcs, err := cfg.pluginConfigs()
	if err != nil {
		return nil, err
	}
	if len(pcs) > 0 {
		// The host copies each verified binary there and runs the copy;
		// its directory is new at every start, so the place is the name.
		add(filepath.Join(os.TempDir(), "agentkernel-plugins-*"), "the plugin host's private copies of the plugin binaries it runs")
	}
	for _, pc := range pcs {
		if pc.Interpreter != nil {
			// An interpreted plugin: every file its lock may list.
			add(filepath.Dir(pc.Path), "the directory of plugin "+pc.Name)
			add(pc.Interpreter.Path, "the interpreter of plugin "+pc.Name)
		} else {
			add(pc.Path, "the binary of plugin "+pc.Name)
		}
		files, err := hostpath.CommandPaths(append([]string{pc.Path}, pc.Args...), pc.Dir)
		for _, f := range files {
			if f != cfg.path(pc.Path) {
				owned(f, "a file the arguments of plugin "+pc.Name+" name", "plugin:"+pc.Name)
			}
		}
		unresolved(err, "the command of plugin "+pc.Name, "plugin:"+pc.Name)
	}
	dc, err := cfg.declaredConfig()
	if err != nil {
		return nil, err
	}
	for _, c := range dc.Command {
		// What a command tool runs is configuration: a script another
		// tool can rewrite would run with this tool's grant. The
		// arguments the model fills in are its own; the written-out
		// prefix of argv is checked like a plugin's.
		dir := c.Dir
		if dir == "" {
			dir = cfg.path(cfg.Workspace)
		}
		files, err := hostpath.CommandPaths(literalArgv(c.Argv), dir)
		for _, f := range files {
			owned(f, "a file the argv of command tool "+c.Name+" runs", "command:"+c.Name)
		}
		unresolved(err, "the argv of command tool "+c.Name, "command:"+c.Name)
	}
	scs, err := cfg.mcpConfigs()
	if err != nil {
		return nil, err
	}
	for _, sc := range scs {
		files, err := mcp.ProgramFiles(sc, cfg.path(cfg.Workspace))
		for _, f := range files {
			owned(f, "a file the command of MCP server "+sc.Name+" runs", "mcp:"+sc.Name)
		}
		unresolved(err, "the command of MCP server "+sc.Name, "mcp:"+sc.Name)
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

// literalArgv is the written-out prefix of a command tool's argv: the
// entries before the first that holds a placeholder ({name}), with the
// literal braces ({{ and }}) unescaped.
func literalArgv(argv []string) []string {
	var out []string
	for _, a := range argv {
		lit := strings.NewReplacer("{{", "", "}}", "").Replace(a)
		if strings.ContainsAny(lit, "{}") {
			break
		}
		out = append(out, strings.NewReplacer("{{", "{", "}}", "}").Replace(a))
	}
	return out
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
// to p (hostpath.Locations), or that lies inside p (a grant of a
// directory within a protected one), and that place; ok is false when
// tools can change neither p nor what p leads to. The areas of owner (a
// native tool's own grant) do not count.
func writableBy(p, owner string, areas []writableArea) (area writableArea, at string, ok bool) {
	for _, loc := range hostpath.Locations(p) {
		for _, a := range areas {
			if owner != "" && a.owner == owner {
				continue
			}
			if dir := realPath(a.dir); within(loc, dir) || within(dir, loc) {
				return a, loc, true
			}
		}
	}
	return writableArea{}, "", false
}

// anyWritable returns a writable area that is not owner's own grant.
func anyWritable(owner string, areas []writableArea) (writableArea, bool) {
	for _, a := range areas {
		if owner == "" || a.owner != owner {
			return a, true
		}
	}
	return writableArea{}, false
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
		if f.unresolved != nil {
			if a, ok := anyWritable(f.owner, areas); ok {
				errs = append(errs, fmt.Errorf("%s: %s: %w; and tools can write (%s %s), so what it runs could be theirs. "+
					"Name the program and its script directly (command: [python3, /srv/server.py]), without variables, globs or substitutions, outside every directory tools can write: %w",
					cfg.source(), f.what, f.unresolved, a.by, a.dir, ErrProtectedWritable))
			}
			continue
		}
		if !f.startCheck || (allowed[realPath(f.path)] && !f.cache) {
			continue
		}
		a, at, ok := writableBy(f.path, f.owner, areas)
		if !ok {
			continue
		}
		if f.cache {
			errs = append(errs, cfg.cacheRefusal(f.path, at, a))
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

// cacheRefusal is the error of a writable area that reaches the kernel's
// caches in dir: it names every cache, because the fix is one for all.
func (cfg *Config) cacheRefusal(dir, at string, a writableArea) error {
	var list []string
	for _, c := range kernelCaches {
		list = append(list, c.dir+"/ ("+c.what+")")
	}
	via := ""
	if real := realPath(dir); at != real && !within(realPath(a.dir), real) {
		via = " (through the symbolic link " + at + ")"
	}
	return fmt.Errorf("%s: %s %s can write the kernel's caches in %s%s: %s, each with the key that authenticates its entries. "+
		"No grant may cover them, and security.allow_writable does not accept them: grant a narrower directory than %s "+
		"(a tool's own cache, such as %s, rather than all of them), or give the kernel its caches outside the grant (XDG_CACHE_HOME=DIR in the kernel's environment): %w",
		cfg.source(), a.by, a.dir, dir, via, strings.Join(list, ", "), a.dir, filepath.Join(filepath.Dir(dir), "pip"), ErrProtectedWritable)
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
		if f.path != "" {
			out = append(out, f.path)
		}
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
