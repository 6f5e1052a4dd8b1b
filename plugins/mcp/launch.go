package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/hostpath"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/proc"
)

// command builds the process of a stdio server. It is the only place this
// package creates a process, through the process owner (sandbox/proc),
// for the MCP SDK's transport to start: the server runs confined by
// StdioGrant, gets only the allowlisted environment, runs in cfg.Dir under
// the sandbox's launcher (its whole group killed, with everything it
// started, when the kernel stops it: proc.Kill), and its stderr goes to
// the log, a line at a time, with the last lines kept for crash reports.
func command(ctx context.Context, cfg ServerConfig, allowMissing []sandbox.Layer, stderr *stderrLog) (*exec.Cmd, error) {
	cfg, err := cfg.expandCommand()
	if err != nil {
		return nil, err
	}
	g, err := StdioGrant(cfg, allowMissing)
	if err != nil {
		return nil, err
	}
	scmd, err := proc.Command(ctx, proc.Spec{Argv: cfg.Command, Dir: cfg.Dir, Grant: g, Env: cfg.Env, Stderr: stderr})
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: %w", cfg.Name, grantPlace(err, g, cfg))
	}
	return scmd.Cmd, nil
}

// grantPlace renames the rule a sandbox grant error names ("fs[38].path",
// an index into the grant StdioGrant built) after where it comes from: the
// server's own grant.fs[i] in the configuration, or a rule the kernel adds
// itself. The error returned still unwraps to err.
func grantPlace(err error, g sandbox.Grant, cfg ServerConfig) error {
	var ge *sandbox.GrantError
	if !errors.As(err, &ge) {
		return err
	}
	var i int
	if _, scanErr := fmt.Sscanf(ge.Field, "fs[%d]", &i); scanErr != nil || i < 0 || i >= len(g.FS) {
		return err
	}
	own, cerr := cfg.ConfiguredGrant()
	if cerr != nil {
		return err
	}
	place := fmt.Sprintf("the default grant's rule for %s (the server's program, a file its command names or its working directory)", g.FS[i].Path)
	if first := len(g.FS) - len(own.FS); i >= first {
		place = fmt.Sprintf("grant.fs[%d].path (tools.mcp, server %s)", i-first, cfg.Name)
	}
	return &placedError{msg: strings.Replace(err.Error(), "sandbox grant: "+ge.Field, "sandbox grant: "+place, 1), err: err}
}

// placedError is an error with its message rewritten (grantPlace).
type placedError struct {
	msg string
	err error
}

func (e *placedError) Error() string { return e.msg }
func (e *placedError) Unwrap() error { return e.err }

// ConfiguredGrant decodes the server's grant block as written (the zero
// Grant without one): what the operator added to the default grant.
func (c ServerConfig) ConfiguredGrant() (sandbox.Grant, error) {
	var g sandbox.Grant
	if c.Grant.IsZero() {
		return g, nil
	}
	b, err := yaml.Marshal(&c.Grant)
	if err != nil {
		return g, fmt.Errorf("mcp server %s: grant: %w", c.Name, err)
	}
	if g, err = sandbox.DecodeYAML(b); err != nil {
		return g, fmt.Errorf("mcp server %s: grant: %w", c.Name, err)
	}
	return g, nil
}

// StdioGrant is a stdio server's sandbox grant: the system directories,
// its program, every file its command names (a script given to an
// interpreter, npm's .bin link and its target: ProgramFiles) with its
// package directory (the node_modules tree, the virtual environment), and
// its working directory, all read-only, plus the config's grant (deny by
// default: no network, no writes); env is cfg.Env. cfg is normalized
// ({workspace} expanded).
func StdioGrant(cfg ServerConfig, allowMissing []sandbox.Layer) (sandbox.Grant, error) {
	g, err := cfg.ConfiguredGrant()
	if err != nil {
		return g, err
	}
	fs := sandbox.SystemDirs()
	prog := ""
	if p, err := exec.LookPath(cfg.Command[0]); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			prog = abs
			fs = append(fs, sandbox.FSRule{Path: abs, Mode: "ro"})
		}
	}
	rw := g.WritablePaths()
	// What the command runs, through a shell wrapper too; a script the
	// kernel cannot resolve was refused at start where a tool can write.
	paths, _ := hostpath.CommandPaths(cfg.Command, cfg.Dir)
	for _, p := range hostpath.ReadPaths(hostpath.Existing(paths)) {
		if p != prog && !hostpath.Within(p, rw) { // a file the grant lets it write stays writable
			fs = append(fs, sandbox.FSRule{Path: p, Mode: "ro"})
		}
	}
	if cfg.Dir != "" {
		fs = append(fs, sandbox.FSRule{Path: cfg.Dir, Mode: "ro"})
	}
	g.FS = append(fs, g.FS...)
	g.Env = slices.Clone(cfg.Env)
	g.AllowMissing = append(g.AllowMissing, allowMissing...)
	return g, nil
}

// ProgramFiles returns the paths a stdio server's command runs, for the
// workspace that {workspace} stands for (hostpath.CommandPaths): its
// program, every argument that names an existing file relative to the
// server's working directory (a symbolic link and its target), the script
// an interpreter runs whether or not it exists yet, and the same for every
// command of a shell wrapper's -c script. They are kernel files: the
// kernel refuses to start while a tool could write one, and the server may
// read them. A -c script that cannot be resolved statically is a
// *hostpath.ScriptError. An HTTP server (or an invalid configuration) has
// none.
func ProgramFiles(sc ServerConfig, workspace string) ([]string, error) {
	cfg, err := sc.normalize(workspace)
	if err != nil || len(cfg.Command) == 0 {
		return nil, nil
	}
	// The arguments as the server gets them: a ${env:NAME} that names a
	// file names it here too (one not set starts nothing).
	if x, err := cfg.expandCommand(); err == nil {
		cfg = x
	}
	return hostpath.CommandPaths(cfg.Command, cfg.Dir)
}

// maxLogLine caps one logged line of a server's stderr; tailBytes is how
// much of its end a crash report quotes.
const (
	maxLogLine = 4 << 10
	tailBytes  = 2 << 10
)

// stderrLog logs what a server writes to stderr, a line at a time, and
// keeps the tail for crash reports. Safe for concurrent use.
type stderrLog struct {
	log  hclog.Logger
	mu   sync.Mutex
	buf  []byte
	tail []byte
}

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail = append(l.tail, p...)
	if len(l.tail) > tailBytes {
		l.tail = append(l.tail[:0], l.tail[len(l.tail)-tailBytes:]...)
	}
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLogLine {
				l.log.Info(string(l.buf[:maxLogLine]), "stream", "stderr")
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		line := bytes.TrimRight(l.buf[:min(i, maxLogLine)], "\r")
		if len(line) > 0 {
			l.log.Info(string(line), "stream", "stderr")
		}
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
}

// lastLines returns the kept tail of stderr, trimmed.
func (l *stderrLog) lastLines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(bytes.TrimSpace(l.tail))
}
