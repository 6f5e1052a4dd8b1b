package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/plugins/mcp"
)

// mcpEntry is one server of tools.mcp as written: its configuration, where
// it is in the file, and what is wrong with it (nil when nothing is).
type mcpEntry struct {
	sc   mcp.ServerConfig
	line int // 1-based line of the entry in mcpSource(), 0 if unknown
	err  error
}

// mcpSource names the file whose tools.mcp is in effect.
func (cfg *Config) mcpSource() string {
	if cfg.mcpFile != "" && cfg.mcpFile != "(embedded defaults)" {
		return cfg.mcpFile
	}
	return cfg.source()
}

// mcpEntries decodes tools.mcp and checks each server on its own: a server
// that is wrong (its fields, or a grant naming a path that does not exist)
// carries its error, placed at its line in the file that sets it, and the
// others are unaffected. The error is for a list that does not decode.
func (cfg *Config) mcpEntries() ([]mcpEntry, error) {
	var scs []mcp.ServerConfig
	if err := cfg.section("tools.mcp", &cfg.Tools.MCP, &scs); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.File = cfg.mcpSource()
		}
		return nil, err
	}
	var items []*yaml.Node
	if n := &cfg.Tools.MCP; n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	out := make([]mcpEntry, len(scs))
	for i, sc := range scs {
		e := mcpEntry{sc: sc}
		var item *yaml.Node
		if i < len(items) {
			item = items[i]
			e.line = item.Line
		}
		field := fmt.Sprintf("tools.mcp[%d]", i)
		if err := sc.Validate(); err != nil {
			// The server's own error, placed in the file.
			var ce *ConfigError
			if !errors.As(err, &ce) {
				ce = &ConfigError{Err: err}
			}
			ce.File, ce.Field = cfg.mcpSource(), strings.TrimSuffix(field+"."+ce.Field, ".")
			if ce.Line == 0 && item != nil {
				ce.Line, ce.Column = item.Line, item.Column
			}
			e.err = ce
		} else if err := grantPathsExist(sc.Grant, cfg.mcpSource(), field+".grant"); err != nil {
			e.err = err
		}
		out[i] = e
	}
	return out, nil
}

// mcpConfigs is the configured servers, or the first one's error.
func (cfg *Config) mcpConfigs() ([]mcp.ServerConfig, error) {
	entries, err := cfg.mcpEntries()
	if err != nil {
		return nil, err
	}
	scs := make([]mcp.ServerConfig, len(entries))
	for i, e := range entries {
		if e.err != nil {
			return nil, e.err
		}
		scs[i] = e.sc
	}
	return scs, nil
}

// grantPathsExist checks that every fs rule of a grant (as written, paths
// already absolute) that is not optional names a path that exists: the
// sandbox refuses to start a server whose grant names a missing one, and
// then it can only say where the rule sits in the grant it built (after
// the system directories). Here the error names the user's own line.
func grantPathsExist(grant yaml.Node, file, field string) error {
	if grant.Kind != yaml.MappingNode {
		return nil
	}
	var fs *yaml.Node
	for i := 0; i+1 < len(grant.Content); i += 2 {
		if grant.Content[i].Value == "fs" {
			fs = grant.Content[i+1]
		}
	}
	if fs == nil || fs.Kind != yaml.SequenceNode {
		return nil
	}
	for j, rule := range fs.Content {
		if rule.Kind != yaml.MappingNode {
			continue
		}
		var path *yaml.Node
		optional := false
		for k := 0; k+1 < len(rule.Content); k += 2 {
			switch rule.Content[k].Value {
			case "path":
				path = rule.Content[k+1]
			case "optional":
				optional, _ = strconv.ParseBool(rule.Content[k+1].Value)
			}
		}
		if path == nil || optional || path.Value == "" {
			continue
		}
		if _, err := os.Stat(path.Value); errors.Is(err, os.ErrNotExist) {
			return &ConfigError{File: file, Line: path.Line, Column: path.Column, Field: fmt.Sprintf("%s.fs[%d].path", field, j),
				Err: fmt.Errorf("%s does not exist: create it (mkdir -p %s), remove the rule, or add optional: true to skip it while it is missing", path.Value, shellQuote(path.Value))}
		}
	}
	return nil
}

// Server states `kernel mcp ls` adds to the host's (mcp.State).
const (
	// mcpInvalid: the entry in tools.mcp is wrong; nothing was started.
	mcpInvalid mcp.State = "invalid"
	// mcpFailed: the server could not be started or reached.
	mcpFailed mcp.State = "failed"
)

// mcpList is `kernel mcp ls`: every configured server with its state and
// its tools. A server that is misconfigured or fails to start is listed
// with its error, and the others are still connected and listed; the exit
// status says whether every one works.
func mcpList(ctx context.Context, cf *commonFlags, env *cliEnv, asJSON bool) error {
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	entries, err := cfg.mcpEntries()
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintf(env.stderr, "%s configures no MCP servers (tools.mcp)\n", cfg.source())
		return nil
	}
	host := mcp.NewHost(mcp.HostConfig{
		AllowMissing: cfg.Sandbox.AllowMissing,
		Logger:       newLevelLogger(env.stderr, cfg.logLevel).Named("mcp"),
		Workspace:    cfg.path(cfg.Workspace),
		CacheDir:     filepath.Join(cacheDir(), "mcp"),
	})
	defer host.Close()
	failed := map[string]error{}
	for _, e := range entries {
		if e.err != nil {
			continue
		}
		if _, _, err := host.Load(ctx, e.sc); err != nil {
			failed[e.sc.Name] = err
		}
	}
	for name, err := range host.Connect(ctx) {
		if err != nil && failed[name] == nil {
			failed[name] = err
		}
	}
	loaded := map[string]mcp.ServerStatus{}
	for _, s := range host.Servers() {
		loaded[s.Name] = s
	}
	servers := make([]mcp.ServerStatus, 0, len(entries))
	bad := 0
	for _, e := range entries {
		s, ok := loaded[e.sc.Name]
		if !ok {
			s = mcp.ServerStatus{Name: e.sc.Name, Transport: "stdio", Target: strings.Join(e.sc.Command, " "), Tools: []mcp.ToolStatus{}}
			if e.sc.URL != "" {
				s.Transport, s.Target = "http", e.sc.URL
			}
		}
		switch {
		case e.err != nil:
			s.State, s.LastError = mcpInvalid, e.err.Error()
		case failed[e.sc.Name] != nil:
			s.State, s.LastError = mcpFailed, failed[e.sc.Name].Error()
		}
		if s.State == mcpInvalid || s.State == mcpFailed {
			bad++
		}
		s.LastError = scrubText(s.LastError)
		servers = append(servers, s)
	}
	if err := writeMCPList(env, servers, asJSON); err != nil {
		return err
	}
	if bad > 0 {
		return exitError{code: 1, msg: fmt.Sprintf("%d of %d MCP servers do not work (listed above with why)", bad, len(servers))}
	}
	return nil
}

func writeMCPList(env *cliEnv, servers []mcp.ServerStatus, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(servers)
	}
	var rows [][]string
	var why []string
	for _, s := range servers {
		rows = append(rows, []string{s.Name, string(s.State), s.Transport, s.Target})
		if s.LastError != "" && (s.State == mcpInvalid || s.State == mcpFailed) {
			why = append(why, fmt.Sprintf("%s (%s): %s", s.Name, s.State, s.LastError))
		}
		for _, t := range s.Tools {
			hints := "-"
			if len(t.Hints) > 0 {
				hints = "hints: " + strings.Join(t.Hints, ",")
			}
			rows = append(rows, []string{"  " + t.Name, string(t.Tier), hints, clip(firstLine(t.Description), 50)})
		}
		for _, p := range s.Problems {
			rows = append(rows, []string{"  " + p.Tool, "LEFT OUT", clip(p.Reason, 60), ""})
		}
	}
	// On a terminal the long cells are cut to fit (`kernel mcp ls --json`
	// has them whole).
	if _, err := writeTable(env.stdout, rows, terminalWidth(env.stdout), 3, 2); err != nil {
		return err
	}
	if len(why) > 0 {
		_, err := fmt.Fprintf(env.stdout, "\n%s\n", strings.Join(why, "\n"))
		return err
	}
	return nil
}
