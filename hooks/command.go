package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/hostpath"
	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/proc"
)

// Limits of the command hook protocol.
const (
	// MaxCommandTimeout is the longest timeout a command hook may set.
	MaxCommandTimeout = 10 * time.Minute
	// maxReply bounds a command hook's stdout.
	maxReply = 8 << 20
	// maxStderr is how much of stderr is kept (the block reason, or the
	// error of a failed hook).
	maxStderr = 4096
)

// Input is the JSON document a command hook reads on stdin
// (schemas/hook-input.schema.json). It is written on one line.
type Input struct {
	// Version of the protocol: 1.
	Version int `json:"version"`
	// Hook is the hook's name, Phase "before" or "after".
	Hook  string `json:"hook"`
	Phase Phase  `json:"phase"`
	// SessionID, CallID, Run and Turn place the call: Run is the run (user
	// prompt) of the session and Turn the turn (model generation) of that
	// run that asked for the call, both from 1 (see the glossary in package
	// kernel).
	SessionID string `json:"session_id"`
	CallID    string `json:"call_id"`
	Run       int    `json:"run"`
	Turn      int    `json:"turn"`
	// Approved is true when a human approved the call.
	Approved bool     `json:"approved"`
	Tool     ToolInfo `json:"tool"`
	// Args are the call's arguments, valid against the tool's schema.
	Args json.RawMessage `json:"args"`
	// Decision is the policy's decision on the call, in the after phase
	// when a policy ruled on it: hooks receive the policy's verdict.
	Decision *kernel.Decision `json:"decision,omitempty"`
	// Result is the result so far, in the after phase only (already
	// scrubbed of credentials when the scrubber is on).
	Result *ResultInfo `json:"result,omitempty"`
}

// ToolInfo describes the called tool.
type ToolInfo struct {
	Name   string   `json:"name"`
	Tier   string   `json:"tier"`
	Source string   `json:"source"`
	Tags   []string `json:"tags"`
}

// ResultInfo is a tool result in the hook protocol.
type ResultInfo struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error"`
	// Error is the error text when the call failed (input only).
	Error string `json:"error,omitempty"`
}

// Output is the JSON document a command hook may print on stdout
// (schemas/hook-output.schema.json). Printing nothing and exiting 0 allows
// the call unchanged.
type Output struct {
	// Decision is "allow" or "block".
	Decision string `json:"decision"`
	// Reason is what the model reads when the hook blocks.
	Reason string `json:"reason,omitempty"`
	// UpdatedArgs replace the arguments (before phase only); they are
	// validated against the tool's schema.
	UpdatedArgs json.RawMessage `json:"updated_args,omitempty"`
	// UpdatedResult answers the call without running it (before) or
	// replaces its result (after).
	UpdatedResult *ResultInfo `json:"updated_result,omitempty"`
	// AdditionalContext is appended to the result the model reads.
	AdditionalContext string `json:"additional_context,omitempty"`
}

// commandHook runs an external program.
type commandHook struct {
	name    string
	phase   Phase
	argv    []string
	timeout time.Duration
	env     []string
	message string
	grant   sandbox.Grant
}

func compileCommand(h *hook, r Rule, opts Options, field func(string) string) []error {
	ch, errs := newCommandHook(r, h.phase, opts, field)
	if errs != nil {
		return errs
	}
	if h.phase == PhaseBefore {
		h.before = func(ctx context.Context, call *kernel.Call) (Verdict, error) {
			return ch.run(ctx, call, nil, nil)
		}
	} else {
		h.after = func(ctx context.Context, call *kernel.Call, res kernel.Result, err error) (Verdict, error) {
			return ch.run(ctx, call, &res, err)
		}
	}
	return nil
}

// newCommandHook checks a command rule and resolves its program and grant.
func newCommandHook(r Rule, phase Phase, opts Options, field func(string) string) (*commandHook, []error) {
	var errs []error
	bad := func(f string, format string, args ...any) {
		errs = append(errs, hookError(r.Name, field(f), fmt.Errorf(format, args...)))
	}
	c := r.Command
	ch := &commandHook{name: r.Name, phase: phase, timeout: c.Timeout.D(), env: c.Env, message: r.Message}
	switch {
	case len(c.Argv) == 0 || c.Argv[0] == "":
		bad("argv", "needs at least the program")
	default:
		prog, err := resolveProgram(c.Argv[0], opts.Dir)
		if err != nil {
			bad("argv[0]", "%v", err)
		}
		ch.argv = append([]string{prog}, c.Argv[1:]...)
	}
	switch {
	case c.Timeout < 0:
		bad("timeout", "must be positive, got %s", c.Timeout)
	case c.Timeout == 0:
		ch.timeout = DefaultCommandTimeout
	case c.Timeout.D() > MaxCommandTimeout:
		bad("timeout", "must be at most %s, got %s", MaxCommandTimeout, c.Timeout)
	}
	for i, name := range c.Env {
		if !config.ValidEnvName(name) {
			bad(fmt.Sprintf("env[%d]", i), "%q is not an environment variable name (values come from the kernel's environment, never from the file)", name)
		}
	}
	if len(ch.argv) > 0 {
		ch.grant = HookGrant(c, opts, ch.argv[0])
		if err := ch.grant.Validate(); err != nil {
			bad("sandbox", "%v", err)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return ch, nil
}

// HookGrant is a command hook's effective sandbox grant: the system
// directories, the program file prog, opts.Workspace and the files the
// command runs (CommandFiles, with their package directories) read-only,
// plus c.Sandbox; env is c.Env.
func HookGrant(c *CommandConfig, opts Options, prog string) sandbox.Grant {
	g := c.Sandbox
	fs := sandbox.SystemDirs()
	if opts.Workspace != "" {
		fs = append(fs, sandbox.FSRule{Path: opts.Workspace, Mode: "ro"})
	}
	if filepath.IsAbs(prog) {
		fs = append(fs, sandbox.FSRule{Path: prog, Mode: "ro"})
	}
	rw := g.WritablePaths()
	files, _ := CommandFiles(c, opts) // an unresolved script was refused at start where a tool can write
	for _, p := range hostpath.ReadPaths(hostpath.Existing(files)) {
		if !hostpath.Within(p, rw) { // a file the grant lets it write stays writable
			fs = append(fs, sandbox.FSRule{Path: p, Mode: "ro"})
		}
	}
	g.FS = append(fs, g.FS...)
	g.Env = slices.Clone(c.Env)
	g.AllowMissing = append(slices.Clone(g.AllowMissing), opts.AllowMissing...)
	return g
}

// CommandFiles returns the paths a command hook runs (hostpath.CommandPaths):
// its program (argv[0] as the hook resolves it), every argument that
// names an existing file relative to the kernel's working directory where
// the hook runs (for a symbolic link both the link and its target), the
// script an interpreter runs ([sh, hook.sh], [python3, check.py]) whether
// or not it exists yet, and the same for every command of a shell
// wrapper's -c script. These are kernel files, readable by the hook and
// protected from tools. A -c script that cannot be resolved statically is
// a *hostpath.ScriptError.
func CommandFiles(c *CommandConfig, opts Options) ([]string, error) {
	if c == nil || len(c.Argv) == 0 {
		return nil, nil
	}
	argv := c.Argv
	if prog, err := resolveProgram(c.Argv[0], opts.Dir); err == nil {
		argv = append([]string{prog}, c.Argv[1:]...)
	}
	return hostpath.CommandPaths(argv, "")
}

// resolveProgram finds argv[0]: a path with a slash relative to dir, or a
// name in PATH. It must be an executable file.
func resolveProgram(p, dir string) (string, error) {
	if !strings.ContainsRune(p, '/') && !strings.ContainsRune(p, filepath.Separator) {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%q is not in PATH: %w", p, err)
		}
		return found, nil
	}
	if !filepath.IsAbs(p) {
		if dir == "" {
			wd, err := os.Getwd()
			if err != nil {
				return "", err
			}
			dir = wd
		}
		p = filepath.Join(dir, p)
	}
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return "", err
	case st.IsDir():
		return "", fmt.Errorf("%s is a directory", p)
	case st.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s is not executable (chmod +x it)", p)
	}
	return p, nil
}

func (ch *commandHook) input(c *kernel.Call, res *kernel.Result, err error) ([]byte, error) {
	in := Input{
		Version: 1, Hook: ch.name, Phase: ch.phase, CallID: c.ID(), Approved: c.Approved(),
		Tool: ToolInfo{Name: c.Tool().Name, Tier: string(c.Tool().Tier), Source: c.Tool().Source, Tags: c.Tool().Tags},
		Args: c.Args(),
	}
	if in.Tool.Tags == nil {
		in.Tool.Tags = []string{}
	}
	if len(in.Args) == 0 {
		in.Args = json.RawMessage(`{}`)
	}
	if c.State() != nil {
		in.SessionID, in.Run, in.Turn = c.State().SessionID, c.State().Run, c.State().Turn
	}
	if res != nil {
		in.Decision = c.Decision()
		in.Result = &ResultInfo{Content: res.Content, IsError: res.IsError || err != nil}
		if err != nil {
			in.Result.Error = err.Error()
		}
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// run runs the program once and turns its answer into a Verdict.
func (ch *commandHook) run(ctx context.Context, c *kernel.Call, res *kernel.Result, rerr error) (Verdict, error) {
	in, err := ch.input(c, res, rerr)
	if err != nil {
		return Verdict{}, fmt.Errorf("encode the hook input: %w", err)
	}
	reply, block, err := ch.exec(ctx, in)
	switch {
	case err != nil:
		return Verdict{}, err
	case block != nil:
		return Verdict{Block: true, Reason: *block}, nil
	}
	return ch.verdict(reply)
}

// exec runs the program once on the input in: its reply (stdout), or the
// reason it blocked with (exit code 2), or why it failed.
func (ch *commandHook) exec(ctx context.Context, in []byte) (reply []byte, block *string, err error) {
	rctx, cancel := context.WithTimeout(ctx, ch.timeout)
	defer cancel()
	stdout := &cappedBuffer{max: maxReply}
	stderr := &cappedBuffer{max: maxStderr}
	// The process owner kills the hook and everything it left running
	// (they die with the sandbox's init) when rctx ends.
	p, err := proc.Start(rctx, proc.Spec{Argv: ch.argv, Grant: ch.grant, Env: ch.env,
		Stdin: bytes.NewReader(in), Stdout: stdout, Stderr: stderr, Prestarted: true})
	if err != nil {
		return nil, nil, fmt.Errorf("run command: %w", err)
	}
	exit := p.Wait()
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return nil, nil, fmt.Errorf("command timed out after %s (its process group was killed)", ch.timeout)
	}
	var failed interface{ ExitCode() int } // *sandbox.ExitError, or *exec.ExitError off Linux
	switch {
	case exit.Code() == 2:
		reason := strings.TrimSpace(stderr.String())
		if reason == "" {
			reason = ch.message
		}
		if reason == "" {
			reason = "the hook exited with code 2"
		}
		return nil, &reason, nil
	case errors.As(exit.Err, &failed):
		return nil, nil, fmt.Errorf("command %v%s", exit.Err, stderrSuffix(stderr))
	case exit.Err == nil, errors.Is(exit.Err, exec.ErrWaitDelay):
		// Exited 0 (if something it started kept the pipes open, the
		// group was killed and the answer stands).
	default:
		return nil, nil, fmt.Errorf("run command: %w", exit.Err)
	}
	if stdout.over {
		return nil, nil, fmt.Errorf("the reply is larger than %d bytes", maxReply)
	}
	return stdout.Bytes(), nil, nil
}

func stderrSuffix(b *cappedBuffer) string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return ""
	}
	return ": " + s
}

// verdict decodes and validates a reply.
func (ch *commandHook) verdict(reply []byte) (Verdict, error) {
	reply = bytes.TrimSpace(reply)
	if len(reply) == 0 {
		return Verdict{}, nil
	}
	out, err := ParseOutput(reply)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Reason: out.Reason, Context: out.AdditionalContext}
	if out.Decision == "block" {
		v.Block = true
		if v.Reason == "" {
			v.Reason = ch.message
		}
		return v, nil
	}
	if len(out.UpdatedArgs) > 0 {
		if ch.phase == PhaseAfter {
			return Verdict{}, errors.New("updated_args is only allowed in the before phase")
		}
		v.Args = out.UpdatedArgs
	}
	if out.UpdatedResult != nil {
		v.Result = &kernel.Result{Content: out.UpdatedResult.Content, IsError: out.UpdatedResult.IsError}
	}
	return v, nil
}

// ParseOutput decodes a command hook's reply and validates it against
// schemas/hook-output.schema.json; the error says what is wrong and where.
func ParseOutput(reply []byte) (*Output, error) {
	inst, err := decodeJSON(reply)
	if err != nil {
		return nil, fmt.Errorf("the reply is not JSON (%v): %q", err, excerpt(reply))
	}
	s, err := outputSchema()
	if err != nil {
		return nil, err
	}
	if err := s.Validate(inst); err != nil {
		return nil, fmt.Errorf("the reply does not match schemas/hook-output.schema.json: %s", describe(err))
	}
	var out Output
	if err := json.Unmarshal(reply, &out); err != nil {
		return nil, fmt.Errorf("decode the reply: %w", err)
	}
	return &out, nil
}

// decodeJSON decodes one JSON value, numbers as json.Number, and rejects
// trailing data.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// describe lists a validation error's leaves as "at /path: message".
func describe(err error) string {
	probs := schema.Problems(err)
	if probs == nil {
		return err.Error()
	}
	parts := make([]string, len(probs))
	for i, p := range probs {
		parts[i] = fmt.Sprintf("at %s: %s", p.Location, p.Message)
	}
	return strings.Join(parts, "; ")
}

func excerpt(b []byte) string {
	const n = 200
	if len(b) <= n {
		return string(b)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "..."
}

func outputSchema() (*schema.Schema, error) { return schema.Embedded("hook-output.schema.json") }

func inputSchema() (*schema.Schema, error) { return schema.Embedded("hook-input.schema.json") }

// cappedBuffer keeps the first max bytes written to it and notes the rest.
type cappedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
