package hooks

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// Env is what matchers and the expressions of declarative hooks see. Its
// keys are closed: an expression that names anything else does not
// compile. Only args is a map (the tool's arguments, numbers as float64).
// A missing argument is nil: comparisons and string operators such as
// startsWith are false on it, but arithmetic, len() or upper() on it are
// run-time errors (a failure of the hook), so write (args.n ?? 0) > 10 where
// an argument may be absent.
type Env struct {
	// Tool, Tier, Source and Tags come from the tool's spec.
	Tool   string   `expr:"tool"`
	Tier   string   `expr:"tier"`
	Source string   `expr:"source"`
	Tags   []string `expr:"tags"`
	// Args are the call's current arguments.
	Args map[string]any `expr:"args"`
	// Phase is "before" or "after".
	Phase string `expr:"phase"`
	// Session is the session id; Run the run (user prompt) in it and Turn
	// the turn (model generation) of that run that asked for the call,
	// both from 1 (see the glossary in package kernel).
	Session string `expr:"session"`
	Run     int    `expr:"run"`
	Turn    int    `expr:"turn"`
	// Corrections counts the text tool protocol's corrections sent in the
	// run so far.
	Corrections int `expr:"corrections"`
	// Agent is the agent the call's session runs ("default" for the
	// top-level one) and AgentDepth its depth (0 for a top-level run; see
	// docs/agents.md).
	Agent      string `expr:"agent"`
	AgentDepth int    `expr:"agent_depth"`
	// Approved is true when a human approved the call.
	Approved bool `expr:"approved"`
	// Result and IsError are the result so far (after hooks; empty before).
	Result  string `expr:"result"`
	IsError bool   `expr:"is_error"`
}

// envs recycles Envs: an expression does not keep its environment.
var envs = sync.Pool{New: func() any { return new(Env) }}

// envFor builds the Env of a call; res is nil in the before phase. Give it
// back with releaseEnv once the expressions ran.
func envFor(c *kernel.Call, phase Phase, res *kernel.Result, err error) *Env {
	e := envs.Get().(*Env)
	*e = Env{
		Tool: c.Tool().Name, Tier: string(c.Tool().Tier), Source: c.Tool().Source, Tags: c.Tool().Tags,
		Args: c.Value(), Phase: string(phase), Approved: c.Approved(),
	}
	if e.Args == nil {
		e.Args = map[string]any{}
	}
	if c.State() != nil {
		st := c.State()
		e.Session, e.Run, e.Turn, e.Corrections = st.SessionID, st.Run, st.Turn, st.Corrections
		e.Agent, e.AgentDepth = st.Agent.Name, st.Agent.Depth
	}
	if res != nil {
		e.Result, e.IsError = res.Content, res.IsError || err != nil
	}
	return e
}

func releaseEnv(e *Env) {
	*e = Env{}
	envs.Put(e)
}

// Matcher is a compiled boolean expr expression over Env. It is safe for
// concurrent use.
type Matcher struct {
	src  string
	prog *vm.Program
}

// NewMatcher compiles src, which must be a boolean expression over Env,
// such as `tool == "run_command" && "exec" in tags`.
func NewMatcher(src string) (*Matcher, error) {
	p, err := compileExpr(src, expr.AsBool())
	if err != nil {
		return nil, err
	}
	return &Matcher{src: src, prog: p}, nil
}

// String returns the expression.
func (m *Matcher) String() string { return m.src }

// Match evaluates the expression. A run-time error (a missing argument
// used as a string, say) is returned; hooks treat it as their own failure.
func (m *Matcher) Match(env *Env) (bool, error) {
	out, err := run(m.prog, env)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("expression %q returned %T, not bool", m.src, out)
	}
	return b, nil
}

// vms are reusable expression machines: a VM keeps its stack between runs.
var vms = sync.Pool{New: func() any { return &vm.VM{} }}

// run evaluates a compiled expression on a pooled VM.
func run(p *vm.Program, env *Env) (any, error) {
	machine := vms.Get().(*vm.VM)
	defer vms.Put(machine)
	return machine.Run(p, env)
}

func compileExpr(src string, opts ...expr.Option) (*vm.Program, error) {
	if src == "" {
		return nil, fmt.Errorf("empty expression")
	}
	all := append([]expr.Option{expr.Env(Env{})}, opts...)
	p, err := expr.Compile(src, all...)
	if err != nil {
		return nil, fmt.Errorf("compile %q: %w", src, err)
	}
	return p, nil
}

// compileMapExpr compiles an expression that yields a map (set_args).
func compileMapExpr(src string) (*vm.Program, error) {
	return compileExpr(src, expr.AsKind(reflect.Map))
}
