package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.starlark.net/lib/math"
	stime "go.starlark.net/lib/time"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkjson"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/agentkernel/agentkernel/sdk/wasmtool"
)

// args are the starlark tool's arguments (see tool.json).
type args struct {
	Script string          `json:"script"`
	Input  json.RawMessage `json:"input"`
}

// filename is the script's name in error positions (script.star:3:7).
const filename = "script.star"

// maxSteps caps the interpreter's execution steps (about one per bytecode
// instruction; `while n < k: n += 1` takes 9 per iteration). Two million
// steps take about 2.5 s of CPU in the kernel's sandbox on the development
// VM (0.5 s under the plain wazero CLI, 0.05 s natively), inside the
// manifest's 5 s timeout, so an endless loop usually ends with this
// error, which keeps the printed output and does not depend on the
// machine's load; the host's timeout stays the hard stop.
const maxSteps = 2_000_000

// maxOutput bounds the printed text kept for the result.
const maxOutput = 64 << 10

// options are the dialect: Starlark as specified, plus what model-written
// Python expects (while loops, top-level if/for/while, reassigning
// globals, sets, recursion). Recursion depth is bounded by the
// interpreter (100,000 frames) and, before that, by memory_mb.
var options = &syntax.FileOptions{
	Set:             true,
	While:           true,
	TopLevelControl: true,
	GlobalReassign:  true,
	Recursion:       true,
}

// outcome is the result's content.
type outcome struct {
	// Result is the value of the global `result`, or else of the script's
	// last line if it is an expression, as JSON; null when neither exists
	// or the value has no JSON form (then Repr holds its str()).
	Result json.RawMessage `json:"result"`
	// Type is Starlark's type() of the result ("NoneType" for none).
	Type string `json:"type"`
	// Repr is str(result) when the result cannot be encoded as JSON.
	Repr string `json:"repr,omitempty"`
	// Output is what the script printed.
	Output string `json:"output,omitempty"`
	// Error is why the script failed: a syntax or name error with
	// file:line:col, or a runtime error with its traceback.
	Error string `json:"error,omitempty"`
}

func handle(req wasmtool.Request) (wasmtool.Result, error) {
	if req.Tool != "starlark" {
		return wasmtool.Result{}, fmt.Errorf("%w %q", wasmtool.ErrUnknownTool, req.Tool)
	}
	var a args
	if err := wasmtool.DecodeArgs(req.Args, &a); err != nil {
		return wasmtool.Result{}, err
	}
	return run(a.Script, a.Input), nil
}

// printer collects print() output; every line also goes to stderr so that
// a script stopped by the host (timeout, memory) still shows what it
// printed in the host's error.
type printer struct {
	b         strings.Builder
	truncated bool
}

func (p *printer) print(_ *starlark.Thread, msg string) {
	fmt.Fprintln(os.Stderr, msg)
	if p.b.Len()+len(msg)+1 > maxOutput {
		p.truncated = true
		return
	}
	p.b.WriteString(msg)
	p.b.WriteByte('\n')
}

func (p *printer) String() string {
	if p.truncated {
		return p.b.String() + "[output truncated]\n"
	}
	return p.b.String()
}

// errNoClock is what time.now() reports: the tool is deterministic.
var errNoClock = errors.New("time.now is not available: scripts are deterministic and have no clock (pass the time in input)")

// predeclared are the names every script sees besides Starlark's
// built-ins. time.now is replaced per thread (stime.SetNow), so the time
// module stays usable for parsing and arithmetic.
func predeclared(input starlark.Value) starlark.StringDict {
	return starlark.StringDict{
		"json":   starlarkjson.Module,
		"math":   math.Module,
		"time":   stime.Module,
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
		"input":  input,
	}
}

// run executes script in a fresh thread; input is the call's "input"
// argument as JSON (nil or null: None). The result is an error result
// when the script fails.
func run(script string, input json.RawMessage) wasmtool.Result {
	if strings.TrimSpace(script) == "" {
		return wasmtool.Errorf("script is empty")
	}
	var pr printer
	thread := &starlark.Thread{
		Name:  "script",
		Print: pr.print,
		Load: func(_ *starlark.Thread, module string) (starlark.StringDict, error) {
			return nil, fmt.Errorf("load(%q): there are no modules to load; json, math, time and struct are predeclared", module)
		},
		OnMaxSteps: func(th *starlark.Thread) {
			th.Cancel(fmt.Sprintf("execution step limit exceeded (%d steps): the script runs too long, an endless loop?", maxSteps))
		},
	}
	thread.SetMaxExecutionSteps(maxSteps)
	stime.SetNow(thread, func() (time.Time, error) { return time.Time{}, errNoClock })

	out := outcome{Result: json.RawMessage("null"), Type: "NoneType"}
	value, err := exec(thread, script, input)
	if err == nil && value != nil {
		out.Type = value.Type()
		if b, jerr := encode(thread, value); jerr == nil {
			out.Result = b
		} else {
			out.Repr = value.String()
		}
	}
	if err != nil {
		out.Error = describe(err)
	}
	out.Output = pr.String()
	b, mErr := json.Marshal(out)
	if mErr != nil {
		return wasmtool.Errorf("starlark: encode result: %v", mErr)
	}
	return wasmtool.Result{Content: string(b), IsError: out.Error != ""}
}

// exec parses, resolves and runs the script and returns its result: the
// global `result` if the script defines it, otherwise the value of its
// last statement if that is an expression (as in a Python REPL), otherwise
// nil. The last expression is cut from the file and evaluated in the
// file's globals, so positions in errors stay those of the script.
func exec(thread *starlark.Thread, script string, input json.RawMessage) (starlark.Value, error) {
	in := starlark.Value(starlark.None)
	if len(input) > 0 && string(input) != "null" {
		v, err := starlark.Call(thread, starlarkjson.Module.Members["decode"], starlark.Tuple{starlark.String(input)}, nil)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		in = v
	}
	env := predeclared(in)
	f, err := options.Parse(filename, script, 0)
	if err != nil {
		return nil, err
	}
	var last syntax.Expr
	if n := len(f.Stmts); n > 0 {
		if es, ok := f.Stmts[n-1].(*syntax.ExprStmt); ok {
			last, f.Stmts = es.X, f.Stmts[:n-1]
		}
	}
	prog, err := starlark.FileProgram(f, env.Has)
	if err != nil {
		return nil, err
	}
	globals, err := prog.Init(thread, env)
	if err != nil {
		return nil, err
	}
	var value starlark.Value
	if last != nil {
		scope := make(starlark.StringDict, len(env)+len(globals))
		for k, v := range env {
			scope[k] = v
		}
		for k, v := range globals {
			scope[k] = v
		}
		if value, err = starlark.EvalExprOptions(options, thread, last, scope); err != nil {
			return nil, err
		}
	}
	if r, ok := globals["result"]; ok {
		value = r
	}
	if value == starlark.None {
		value = nil
	}
	return value, nil
}

// encode renders v with json.encode.
func encode(thread *starlark.Thread, v starlark.Value) (json.RawMessage, error) {
	s, err := starlark.Call(thread, starlarkjson.Module.Members["encode"], starlark.Tuple{v}, nil)
	if err != nil {
		return nil, err
	}
	str, ok := s.(starlark.String)
	if !ok || !json.Valid([]byte(str)) {
		return nil, fmt.Errorf("json.encode returned %s", s.Type())
	}
	return json.RawMessage(str), nil
}

// describe formats an error for the model: syntax and resolution errors
// as file:line:col: message (one per line), runtime errors as Starlark's
// traceback, whose frames carry file:line:col.
func describe(err error) string {
	var se syntax.Error
	var rl resolve.ErrorList
	var ee *starlark.EvalError
	switch {
	case errors.As(err, &se):
		return "syntax error: " + se.Error()
	case errors.As(err, &rl):
		lines := make([]string, len(rl))
		for i, e := range rl {
			lines[i] = e.Error()
		}
		return "error: " + strings.Join(lines, "\n")
	case errors.As(err, &ee):
		return backtrace(ee)
	}
	return err.Error()
}

// maxFrames bounds the frames a traceback shows (the outermost and the
// innermost halves are kept).
const maxFrames = 40

// backtrace formats a runtime error like starlark.EvalError.Backtrace,
// with runs of the same frame (deep recursion) folded into one line and
// at most maxFrames lines, so that the model sees the failing line, not
// 100,000 copies of it.
func backtrace(ee *starlark.EvalError) string {
	stack := ee.CallStack
	suffix := ""
	if last := len(stack) - 1; last >= 0 && stack[last].Pos.Filename() == "<builtin>" {
		suffix = " in " + stack[last].Name
		stack = stack[:last]
	}
	var lines []string
	for i := 0; i < len(stack); {
		fr := stack[i]
		j := i + 1
		for j < len(stack) && stack[j] == fr {
			j++
		}
		name := fr.Name
		if name == "<expr>" { // the script's last line, evaluated apart
			name = "<toplevel>"
		}
		lines = append(lines, fmt.Sprintf("  %s: in %s", fr.Pos, name))
		if n := j - i - 1; n > 0 {
			lines = append(lines, fmt.Sprintf("  [the line above repeated %d more times]", n))
		}
		i = j
	}
	if len(lines) > maxFrames {
		cut := len(lines) - maxFrames
		lines = append(append(lines[:maxFrames/2:maxFrames/2], fmt.Sprintf("  [%d more lines]", cut)), lines[len(lines)-maxFrames/2:]...)
	}
	var b strings.Builder
	if len(lines) > 0 {
		b.WriteString("Traceback (most recent call last):\n")
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "Error%s: %s", suffix, ee.Msg)
	return b.String()
}
