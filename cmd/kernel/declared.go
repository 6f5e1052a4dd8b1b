package main

import (
	"bytes"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/plugins/declared"
	"github.com/agentkernel/agentkernel/sandbox"
)

// declaredConfig decodes tools.http, tools.command and tools.inline.
func (cfg *Config) declaredConfig() (declared.Config, error) {
	return declared.Decode(cfg.source(), &cfg.Tools.HTTP, &cfg.Tools.Command, &cfg.Tools.Inline)
}

// declaredOptions are what Build gets from the kernel: the workspace, and
// run_command's grant for command tools, with the tool's own additions.
func (cfg *Config) declaredOptions() declared.Options {
	ws := cfg.path(cfg.Workspace)
	return declared.Options{
		File:      cfg.source(),
		Workspace: ws,
		CommandGrant: func(extra sandbox.Grant, env []string) (sandbox.Grant, []string) {
			extra.AllowMissing = append(extra.AllowMissing, cfg.Sandbox.AllowMissing...)
			g := builtin.CommandGrant(ws, builtin.Config{CommandSandbox: extra, CommandEnv: env})
			return g, g.Env
		},
	}
}

// buildDeclared builds the declared tools of cfg and registers their
// secrets with the process's scrubbers before any of them can run.
func buildDeclared(cfg *Config) (*declared.Set, error) {
	dc, err := cfg.declaredConfig()
	if err != nil {
		return nil, err
	}
	s, err := declared.Build(dc, cfg.declaredOptions())
	if err != nil {
		return nil, err
	}
	for _, v := range s.Secrets {
		heldSecrets.Add(v)
	}
	return s, nil
}

// loadDeclared registers the declared tools, one source at a time
// (http, command, inline, openapi:<file>), so a reload can replace each.
func (a *app) loadDeclared() error {
	s, err := buildDeclared(a.cfg)
	if err != nil {
		return err
	}
	for _, src := range s.Sources() {
		if err := a.tools.Register(s.Tools[src]...); err != nil {
			s.Close()
			return fmt.Errorf("%s: tools (%s): %w", a.cfg.source(), src, err)
		}
	}
	for _, n := range s.Notices {
		a.log.Warn(n)
		a.warnings = append(a.warnings, kernel.Notice{Source: "tools", Level: "warn", Text: n})
	}
	a.declared, a.declaredSum = s, declaredSum(a.cfg)
	a.closers = append(a.closers, func() error { a.declared.Close(); return nil })
	return nil
}

// declaredSum is the declared tools' configuration as text: a reload
// that leaves it as it was changes nothing and says nothing.
func declaredSum(cfg *Config) []byte {
	var b bytes.Buffer
	for _, n := range []*yaml.Node{&cfg.Tools.HTTP, &cfg.Tools.Command, &cfg.Tools.Inline} {
		if n.Kind != 0 {
			out, _ := yaml.Marshal(n)
			b.Write(out)
		}
		b.WriteString("\x00")
	}
	return b.Bytes()
}

// reloadDeclared swaps in the declared tools of cfg (a configuration
// file changed): tools added, changed and removed source by source, the
// running loop seeing them from its next generation. A configuration
// whose tools do not build keeps the running ones, and the
// config.reloaded event says why.
func (a *app) reloadDeclared(cfg *Config) {
	sum := declaredSum(cfg)
	if bytes.Equal(sum, a.declaredSum) {
		return
	}
	ev := kernel.ConfigReloaded{What: "tools", Source: cfg.source()}
	s, err := buildDeclared(cfg)
	if err != nil {
		ev.Error = oneLine(err)
		a.emit(ev)
		return
	}
	old := a.declared
	sources := s.Sources()
	if old != nil {
		for _, src := range old.Sources() {
			if !slices.Contains(sources, src) {
				sources = append(sources, src)
			}
		}
	}
	var problems []string
	for _, src := range sources {
		for _, err := range a.tools.Sync(src, s.Tools[src]) {
			problems = append(problems, err.Error())
		}
		for _, err := range a.syncAgents(src, s.Tools[src]) {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		ev.Error = fmt.Sprintf("left out: %v", problems)
	}
	for _, n := range s.Notices {
		a.log.Warn(n)
	}
	a.declared, a.declaredSum = s, sum
	if old != nil {
		old.Close()
	}
	a.emit(ev)
}
