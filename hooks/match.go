package hooks

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/agentkernel/agentkernel/kernel"
)

// Env is what matchers and the expressions of declarative hooks see, at
// every hook point (a field that does not apply at a point is its zero
// value there). Its keys are closed: an expression that names anything
// else does not compile. Only args is a map (the tool's arguments,
// numbers as float64).
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
	// Phase is the hook point: "before" or "after" for a tool call's
	// hooks, or run_start, before_compact, before_model, after_model,
	// run_end.
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
	// Decision is the policy's effect on the call (after hooks, when a
	// policy ruled on it): allow, ask or deny.
	Decision string `expr:"decision"`
	// Prompt is the run's prompt (at run_start, the prompt as the hooks
	// before this one left it).
	Prompt string `expr:"prompt"`
	// Text is what a lifecycle hook looks at: the prompt (run_start),
	// the messages of the request after the model's last answer — the
	// new prompt, tool results, context (before_model) — the answer
	// (after_model) or the final answer (run_end).
	Text string `expr:"text"`
	// Calls are the tools the answer calls (after_model) or the run
	// called (run_end), in order.
	Calls []string `expr:"calls"`
	// Model is the model of the request (before_model) or the one that
	// answered (after_model).
	Model string `expr:"model"`
	// Tokens is the request's estimated size and Window the model's
	// context window (before_model, before_compact; 0 when unknown).
	Tokens int `expr:"tokens"`
	Window int `expr:"window"`
	// StopReason is how the run ends (run_end).
	StopReason string `expr:"stop_reason"`
	// Continuations counts the run's continuations by run_end hooks.
	Continuations int `expr:"continuations"`
	// Hooks are the verdicts of the lifecycle points so far: run_start's
	// and run_end's in this run, the others' in this turn
	// (hooks.before_model.blocked, ...).
	Hooks kernel.HookVerdicts `expr:"hooks"`
}

// noArgs is args at a lifecycle point: no call, nothing in it.
var noArgs = map[string]any{}

// pointEnv builds the Env of a lifecycle point's input; give it back with
// releaseEnv.
func pointEnv(in PointInput) *Env {
	pi := in.Info()
	e := envs.Get().(*Env)
	*e = Env{Args: noArgs, Phase: string(pi.Point), Session: pi.SessionID, Run: pi.Run, Turn: pi.Turn, Hooks: pi.Hooks}
	if st := pi.State(); st != nil {
		e.Prompt, e.Corrections, e.Continuations = st.Prompt, st.Corrections, st.Continuations
	}
	switch in := in.(type) {
	case *kernel.RunStartInput:
		e.Prompt, e.Text = in.Prompt, in.Prompt
	case *kernel.BeforeCompactInput:
		e.Tokens, e.Window = in.Tokens, in.Window
	case *kernel.BeforeModelInput:
		e.Model, e.Tokens, e.Window = in.Model, in.Tokens, in.Window
		e.Text = newText(in.Messages)
	case *kernel.AfterModelInput:
		e.Model, e.Text = in.Model, in.Answer.Content
		for _, c := range in.Answer.ToolCalls {
			e.Calls = append(e.Calls, c.Name)
		}
	case *kernel.RunEndInput:
		e.StopReason, e.Text, e.Continuations = string(in.StopReason), in.Output, in.Continuations
		for _, c := range in.Calls {
			e.Calls = append(e.Calls, c.Tool)
		}
	}
	return e
}

// newText is the text of the messages of a request after the model's
// last answer, one paragraph each.
func newText(msgs []kernel.Message) string {
	i := len(msgs)
	for i > 0 && msgs[i-1].Role != kernel.RoleAssistant {
		i--
	}
	var b strings.Builder
	for _, m := range msgs[i:] {
		if m.Seq == 0 && m.Role == kernel.RoleSystem && i == 0 {
			continue // the system prompt is the operator's, not new
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(m.Content)
	}
	return b.String()
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
		e.Prompt, e.Continuations, e.Hooks = st.Prompt, st.Continuations, st.Hooks
	}
	if res != nil {
		e.Result, e.IsError = res.Content, res.IsError || err != nil
		if d := c.Decision(); d != nil {
			e.Decision = string(d.Effect)
		}
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
