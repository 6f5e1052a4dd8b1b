package declared

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/tool"
)

// DefaultCommandTimeout bounds a command tool's call when it sets no
// timeout.
const DefaultCommandTimeout = 2 * time.Minute

// maxArgv bounds a command's argv.
const maxArgv = 1024

// CommandGranter builds a command tool's effective grant and environment
// from its configured additions, as the kernel builds run_command's
// (builtin.CommandGrant): the workspace read-write but its .git, the
// system's directories read-only, no network, plus extra.
type CommandGranter func(extra sandbox.Grant, env []string) (sandbox.Grant, []string)

// CommandTool is a declared command tool: a program run with an argv
// template, never through a shell — each argument is one argv entry — and
// confined like run_command through the one process owner. It is safe for
// concurrent use.
type CommandTool struct {
	spec    tool.Spec
	argv    []template
	run     builtin.Confined
	timeout time.Duration
}

func newCommand(c CommandConfig, o Options) (*CommandTool, error) {
	schema, err := parseArgSchema(c.Args)
	if err != nil {
		return nil, fieldErr("args", "%v", err)
	}
	if len(c.Argv) == 0 {
		return nil, fieldErr("argv", "is empty: give the program and its arguments")
	}
	if len(c.Argv) > maxArgv {
		return nil, fieldErr("argv", "has %d entries, more than %d", len(c.Argv), maxArgv)
	}
	t := &CommandTool{timeout: orDefault(c.Timeout.D(), DefaultCommandTimeout)}
	for i, a := range c.Argv {
		tm, err := parseTemplate(a)
		if err != nil {
			return nil, fieldErr(fmt.Sprintf("argv[%d]", i), "%v", err)
		}
		if len(tm.secrets()) > 0 {
			return nil, fieldErr(fmt.Sprintf("argv[%d]", i), "a secret (${env:...}) in argv is visible to every process of the machine: pass it by name in env instead")
		}
		if err := schema.check(tm.args()); err != nil {
			return nil, fieldErr(fmt.Sprintf("argv[%d]", i), "%v", err)
		}
		t.argv = append(t.argv, tm)
	}
	if !t.argv[0].literal() || strings.TrimSpace(c.Argv[0]) == "" {
		return nil, fieldErr("argv[0]", "the program must be written out, not a placeholder")
	}
	if !strings.Contains(c.Argv[0], "/") {
		if _, err := exec.LookPath(c.Argv[0]); err != nil {
			return nil, fieldErr("argv[0]", "%q is not a program on PATH (%v)", c.Argv[0], err)
		}
	}
	if o.CommandGrant == nil {
		return nil, fieldErr("argv", "command tools need the sandbox, which this kernel was built without")
	}
	env := c.Env
	if env == nil {
		env = []string{"PATH", "HOME", "LANG"}
	}
	for i, n := range env {
		if !validEnvName(n) {
			return nil, fieldErr(fmt.Sprintf("env[%d]", i), "%q is not an environment variable name", n)
		}
	}
	grant, env := o.CommandGrant(c.Sandbox, env)
	if err := grant.Validate(); err != nil {
		return nil, fieldErr("sandbox", "%v", err)
	}
	dir := c.Dir
	if dir == "" {
		dir = o.Workspace
	}
	t.run = builtin.Confined{Dir: dir, Grant: grant, Env: env, MaxOutput: c.MaxOutputBytes}
	tier := c.Tier
	if tier == "" {
		tier = tool.TierPrivileged
	}
	t.spec = tool.Spec{Name: c.Name, Description: c.Description, Schema: schema.raw, Tier: tier, Timeout: t.timeout + 10*time.Second,
		Source: SourceCommand, Tags: []string{"exec"}}
	return t, nil
}

// Spec describes the tool.
func (t *CommandTool) Spec() tool.Spec { return t.spec }

// Call runs the program with the argv the arguments make.
func (t *CommandTool) Call(ctx context.Context, raw json.RawMessage) (tool.Result, error) {
	args, err := decodeArgs(raw)
	if err != nil {
		return tool.Result{}, err
	}
	argv, err := t.Argv(args)
	if err != nil {
		return tool.Result{}, err
	}
	res, err := builtin.RunConfined(ctx, t.run, argv, t.timeout)
	if err != nil {
		return tool.Result{}, fmt.Errorf("run %s: %w", argv[0], err)
	}
	return res, nil
}

// Argv is the argv a call with args runs. An entry that is one
// placeholder is one argv entry (one per item for a list) and is left out
// when its argument is absent, as is an entry with text around an absent
// one. A value that would start an entry with "-" is refused unless a "--"
// entry comes before it: the program would read it as an option.
func (t *CommandTool) Argv(args map[string]any) ([]string, error) {
	argv := make([]string, 0, len(t.argv))
	operands := false
	for _, tm := range t.argv {
		if tm.literal() {
			s, _ := tm.render(nil, nil, nil)
			argv = append(argv, s)
			operands = operands || s == "--"
			continue
		}
		var vals []string
		if name, ok := tm.single(); ok {
			v, present := args[name]
			if !present {
				continue
			}
			items, isList := v.([]any)
			if !isList {
				items = []any{v}
			}
			for _, it := range items {
				s, err := text(name, it)
				if err != nil {
					return nil, err
				}
				if strings.HasPrefix(s, "-") && !operands {
					return nil, tool.Errorf(tool.CodeInvalidArgs, "%s is %q, which the program would read as an option: it is refused (the tool's argv needs a \"--\" before it to take such a value)", name, s)
				}
				vals = append(vals, s)
			}
		} else {
			s, err := tm.render(args, nil, nil)
			if errors.Is(err, errAbsent) {
				continue
			}
			if err != nil {
				return nil, err
			}
			vals = []string{s}
		}
		for _, s := range vals {
			if strings.ContainsRune(s, 0) {
				return nil, tool.Errorf(tool.CodeInvalidArgs, "an argument contains a NUL byte")
			}
		}
		argv = append(argv, vals...)
	}
	if len(argv) > maxArgv {
		return nil, tool.Errorf(tool.CodeInvalidArgs, "the arguments make %d argv entries, more than %d", len(argv), maxArgv)
	}
	return argv, nil
}

var _ kernel.Tool = (*CommandTool)(nil)
