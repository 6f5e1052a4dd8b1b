// Package builtin provides the in-process workspace tools: read_file,
// list_dir, search, write_file, edit_file and run_command.
//
// Every file access goes through an [os.Root] opened on the workspace
// directory, so paths that climb out with "..", absolute paths and symbolic
// links that point outside the workspace are refused with an *EscapeError
// (errors.Is(err, ErrEscapes)). Symbolic links that stay inside the
// workspace work as usual.
//
// run_command is different in kind: it runs a real program, confined by
// the sandbox package (CommandGrant: the workspace read-write but its .git
// read-only, the system directories read-only, no network, no other
// process visible). Its working directory is the workspace root, its
// environment is an allowlist, and everything it started is killed when
// the command exits, times out or is cancelled. Test binaries that call
// run_command must call sandbox.Main first in TestMain.
//
// Use:
//
//  1. Call New with a Config naming the workspace root.
//  2. Register the returned tools in a kernel.Registry.
//  3. Close the returned io.Closer when the kernel is done; calls after
//     Close fail.
package builtin

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
)

// Source is the ToolSpec.Source of every tool in this package.
const Source = "builtin"

// Defaults applied to the zero values of Config.
const (
	DefaultMaxReadBytes   = 64 << 10
	DefaultMaxOutputBytes = 32 << 10
	DefaultMaxFileBytes   = 8 << 20
	DefaultCommandTimeout = 2 * time.Minute
)

// defaultCommandEnv is the environment allowlist of run_command when
// Config.CommandEnv is nil.
var defaultCommandEnv = []string{"PATH", "HOME", "LANG"}

// Config configures New. The zero value of every field but Root means the
// documented default. A Config must not be modified after New.
type Config struct {
	// Root is the workspace directory every tool is confined to. Required.
	// A relative Root is resolved against the current directory once, in New.
	Root string `yaml:"root"`
	// Enable names the tools to build, in any order. Nil (the key omitted)
	// means all of them (see Names); an empty, non-nil list ("enable: []")
	// means none. An unknown name is an error.
	Enable []string `yaml:"enable"`
	// MaxReadBytes caps the text one read_file call returns (default 64 KiB).
	MaxReadBytes int `yaml:"max_read_bytes"`
	// MaxOutputBytes caps the text list_dir, search and run_command return
	// (default 32 KiB).
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// MaxFileBytes is the largest file search scans, edit_file rewrites
	// and write_file writes (default 8 MiB). Larger files are skipped by
	// search and refused by the others.
	MaxFileBytes int `yaml:"max_file_bytes"`
	// CommandTimeout is both the default and the maximum run time of one
	// run_command call (default 2 minutes). Calls may ask for less with
	// timeout_seconds.
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// CommandEnv names the environment variables run_command passes to the
	// program, with the kernel's values; every other variable is dropped.
	// Nil (the key omitted) means PATH, HOME and LANG; an empty, non-nil
	// list means no variables at all.
	CommandEnv []string `yaml:"command_env"`
	// Protected are host paths (files or directories) write_file and
	// edit_file refuse to change, wherever the model's path leads: the
	// kernel's own files (policy, configuration, hooks, store). Set by the
	// kernel, not by configuration. The write tools also refuse the
	// workspace's .git unless CommandSandbox grants it read-write.
	Protected []string `yaml:"-"`
	// Scrub, when set, is what the credential scrubber would leave of a
	// text in a tool result, line for line (hooks.Chain.ScrubResult):
	// search matches on it, so its match counts never reveal a credential
	// the scrubber hides. Set by the kernel, not by configuration.
	Scrub func(string) string `yaml:"-"`
	// RootCheck, when set, is called with the opened root's FileInfo; an
	// error refuses New (the kernel checks that a resumed session's
	// workspace is still the directory it recorded, on the directory it
	// actually opened). Set by the kernel, not by configuration.
	RootCheck func(fs.FileInfo) error `yaml:"-"`
	// CommandSandbox adds to run_command's sandbox grant (package
	// sandbox). Without it a command may write the workspace but not its
	// .git (an fs rule granting <root>/.git rw lifts that), read and run
	// the system's program and library directories, and nothing else; it
	// has no network and sees no other process. Its limits and net apply
	// as given; its env is ignored (CommandEnv is the allowlist).
	CommandSandbox sandbox.Grant `yaml:"command_sandbox"`
	// CommandTraceParent adds TRACEPARENT to run_command's environment
	// allowlist, with the W3C traceparent of the call's span as its value
	// (none when the call is not traced): the command's own tracing
	// continues the run's trace. Set by the kernel from
	// telemetry.traces.command_env, not by this section.
	CommandTraceParent bool `yaml:"-"`
}

// TraceParentEnv is the variable that carries the call's W3C traceparent
// to a native command (CommandTraceParent).
const TraceParentEnv = "TRACEPARENT"

// CommandGrant is run_command's effective sandbox grant for the
// workspace root (absolute): the defaults plus cfg.CommandSandbox.
func CommandGrant(root string, cfg Config) sandbox.Grant {
	g := cfg.CommandSandbox
	fs := append(sandbox.SystemDirs(), sandbox.FSRule{Path: root, Mode: "rw"})
	if !gitGranted(root, cfg) {
		fs = append(fs, sandbox.FSRule{Path: filepath.Join(root, ".git"), Mode: "ro", Optional: true})
	}
	g.FS = append(fs, g.FS...)
	env := defaultCommandEnv
	if cfg.CommandEnv != nil { // empty, non-nil: no variables
		env = cfg.CommandEnv
	}
	g.Env = slices.Clone(env)
	if cfg.CommandTraceParent && !slices.Contains(g.Env, TraceParentEnv) {
		g.Env = append(g.Env, TraceParentEnv)
	}
	return g
}

// Tool names, in the order New returns them.
const (
	NameReadFile   = "read_file"
	NameListDir    = "list_dir"
	NameSearch     = "search"
	NameWriteFile  = "write_file"
	NameEditFile   = "edit_file"
	NameRunCommand = "run_command"
)

var allNames = []string{NameReadFile, NameListDir, NameSearch, NameWriteFile, NameEditFile, NameRunCommand}

// Names returns the names of every tool this package provides, in the
// order New returns them.
func Names() []string { return slices.Clone(allNames) }

// ErrEscapes is matched (errors.Is) by every error about a path that would
// leave the workspace.
var ErrEscapes = errors.New("path escapes the workspace")

// EscapeError is a path a tool refused because it would leave the
// workspace: an absolute path, a ".." that climbs above the root, or a
// symbolic link pointing outside the root (or absolute).
type EscapeError struct {
	Path   string
	Reason string
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("path %q escapes the workspace: %s", e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrEscapes) true.
func (e *EscapeError) Is(target error) bool { return target == ErrEscapes }

// New opens the workspace root and builds the enabled tools, in the order
// of Names. The closer closes the root; the tools must not be called after.
func New(cfg Config) ([]kernel.Tool, io.Closer, error) {
	ws, err := newWorkspace(cfg)
	if err != nil {
		return nil, nil, err
	}
	enabled := map[string]bool{}
	for i, n := range cfg.Enable {
		if !slices.Contains(allNames, n) {
			ws.root.Close()
			return nil, nil, fmt.Errorf("builtin: enable[%d]: unknown tool %q (valid: %s)", i, n, strings.Join(allNames, ", "))
		}
		enabled[n] = true
	}
	var tools []kernel.Tool
	for _, n := range allNames {
		if cfg.Enable != nil && !enabled[n] {
			continue
		}
		switch n {
		case NameReadFile:
			tools = append(tools, &ReadFile{ws: ws})
		case NameListDir:
			tools = append(tools, &ListDir{ws: ws})
		case NameSearch:
			tools = append(tools, &Search{ws: ws})
		case NameWriteFile:
			tools = append(tools, &WriteFile{ws: ws})
		case NameEditFile:
			tools = append(tools, &EditFile{ws: ws})
		case NameRunCommand:
			tools = append(tools, &RunCommand{ws: ws})
		}
	}
	return tools, ws.root, nil
}

// workspace is the state the tools share. It is immutable after
// newWorkspace except for writeMu; os.Root is safe for concurrent use.
type workspace struct {
	root           *os.Root
	dir            string // absolute path of the root, run_command's working directory
	maxRead        int
	maxOutput      int
	maxFile        int
	commandTimeout time.Duration
	commandEnv     []string
	// protected are the Config.Protected paths inside the root, real and
	// relative to it; protectedHost are all of them, as given.
	protected     []string
	protectedHost []string
	// scrub is Config.Scrub (nil: none).
	scrub func(string) string
	// gitWritable: the operator granted <root>/.git read-write to
	// commands, so the write tools may change it too (protect.go).
	gitWritable  bool
	commandGrant sandbox.Grant
	// traceParent: TRACEPARENT in commandEnv is the call's trace context.
	traceParent bool
	// writeMu serialises write_file and edit_file so an edit's
	// read-modify-write never interleaves with another write.
	writeMu sync.Mutex
}

func newWorkspace(cfg Config) (*workspace, error) {
	if cfg.Root == "" {
		return nil, errors.New("builtin: root is required: set it to the workspace directory")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_read_bytes", int64(cfg.MaxReadBytes)},
		{"max_output_bytes", int64(cfg.MaxOutputBytes)},
		{"max_file_bytes", int64(cfg.MaxFileBytes)},
		{"command_timeout", int64(cfg.CommandTimeout)},
	} {
		if f.v < 0 {
			return nil, fmt.Errorf("builtin: %s must not be negative (0 means the default)", f.name)
		}
	}
	if cfg.CommandTimeout > 0 && cfg.CommandTimeout < time.Second {
		return nil, fmt.Errorf("builtin: command_timeout %s is below the minimum of 1s", cfg.CommandTimeout)
	}
	for i, name := range cfg.CommandEnv {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, fmt.Errorf("builtin: command_env[%d]: %q is not an environment variable name", i, name)
		}
	}
	dir, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("builtin: resolve root %q: %w", cfg.Root, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("builtin: root %q: %w", cfg.Root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("builtin: root %q is not a directory", cfg.Root)
	}
	grant := CommandGrant(dir, cfg)
	if err := grant.Validate(); err != nil {
		return nil, fmt.Errorf("builtin: command_sandbox: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("builtin: open root %q: %w", cfg.Root, err)
	}
	if cfg.RootCheck != nil {
		fi, err := root.Stat(".")
		if err == nil {
			err = cfg.RootCheck(fi)
		}
		if err != nil {
			root.Close()
			return nil, fmt.Errorf("builtin: root %q: %w", cfg.Root, err)
		}
	}
	return &workspace{
		protected:      protectedInside(dir, cfg.Protected),
		protectedHost:  slices.Clone(cfg.Protected),
		gitWritable:    gitGranted(dir, cfg),
		scrub:          cfg.Scrub,
		root:           root,
		dir:            dir,
		maxRead:        orDefault(cfg.MaxReadBytes, DefaultMaxReadBytes),
		maxOutput:      orDefault(cfg.MaxOutputBytes, DefaultMaxOutputBytes),
		maxFile:        orDefault(cfg.MaxFileBytes, DefaultMaxFileBytes),
		commandTimeout: orDefault(cfg.CommandTimeout, DefaultCommandTimeout),
		commandEnv:     slices.DeleteFunc(slices.Clone(grant.Env), func(n string) bool { return n == TraceParentEnv && cfg.CommandTraceParent }),
		commandGrant:   grant,
		traceParent:    cfg.CommandTraceParent,
	}, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// clean checks a tool's path argument lexically and returns it cleaned,
// slash-separated and relative to the root ("." for the root itself).
// Symbolic links are checked later, by os.Root, on every access.
func clean(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	if path.IsAbs(p) || filepath.IsAbs(p) || strings.HasPrefix(p, `\`) {
		return "", &EscapeError{Path: p, Reason: "absolute paths are not allowed; use a path relative to the workspace root"}
	}
	c := path.Clean(filepath.ToSlash(p))
	if !filepath.IsLocal(filepath.FromSlash(c)) && c != "." {
		return "", &EscapeError{Path: p, Reason: `".." climbs above the workspace root`}
	}
	return c, nil
}

// isEscape reports whether err is os.Root refusing a path that leaves the
// root. os does not export that error; it is a *PathError (or *LinkError)
// whose cause reads "path escapes from parent".
func isEscape(err error) bool {
	for err != nil {
		if err.Error() == "path escapes from parent" {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// fsError turns an error from an os.Root operation on p into one the model
// can act on. verb is what the tool was doing ("read", "list", ...).
func fsError(verb, p string, err error) error {
	if isEscape(err) {
		return &EscapeError{Path: p, Reason: "a symbolic link on the path points outside the workspace (or is absolute)"}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %q: no such file or directory in the workspace: %w", verb, p, fs.ErrNotExist)
	case errors.Is(err, os.ErrClosed):
		return fmt.Errorf("%s %q: the workspace is closed: %w", verb, p, err)
	}
	return fmt.Errorf("%s %q: %w", verb, p, err)
}

// openRegular opens p for reading and checks it is a regular file. It
// opens with O_NONBLOCK so a FIFO cannot block the call, and checks the
// type on the open file so a swap between check and open cannot fool it.
func (w *workspace) openRegular(verb, p string) (*os.File, fs.FileInfo, error) {
	f, err := w.root.OpenFile(p, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, nil, fsError(verb, p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fsError(verb, p, err)
	}
	switch {
	case fi.IsDir():
		f.Close()
		return nil, nil, fmt.Errorf("%s %q: it is a directory; use list_dir to see its entries", verb, p)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, nil, fmt.Errorf("%s %q: not a regular file (%s)", verb, p, fileKind(fi.Mode()))
	}
	return f, fi, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

// sniffLen is how much of a file the binary check looks at, like git.
const sniffLen = 8000

// looksBinary reports whether the start of a file contains a NUL byte.
func looksBinary(head []byte) bool {
	if len(head) > sniffLen {
		head = head[:sniffLen]
	}
	return slices.Contains(head, 0)
}

// humanSize renders n bytes compactly: "312 B", "1.5 KiB", "3.0 MiB".
func humanSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	for _, u := range units {
		v /= 1024
		if v < 1024 || u == "TiB" {
			return fmt.Sprintf("%.1f %s", math.Floor(v*10)/10, u)
		}
	}
	return ""
}
