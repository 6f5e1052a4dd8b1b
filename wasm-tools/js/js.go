package main

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/dop251/goja"

	"github.com/agentkernel/agentkernel/sdk/wasmtool"
)

// args are the js tool's arguments (see tool.json).
type args struct {
	Code string `json:"code"`
}

// maxCallStack bounds recursion so that a runaway recursion is a
// RangeError, not an out-of-memory crash.
const maxCallStack = 5000

// maxConsole bounds the console lines kept for the result.
const maxConsole = 64 << 10

// outcome is the result's content: the value of the last expression as
// JSON (null for undefined, functions and symbols, with its type), and the
// console output.
type outcome struct {
	Value   json.RawMessage `json:"value"`
	Type    string          `json:"type"`
	Console string          `json:"console,omitempty"`
	Error   string          `json:"error,omitempty"`
}

func handle(req wasmtool.Request) (wasmtool.Result, error) {
	if req.Tool != "js" {
		return wasmtool.Result{}, fmt.Errorf("%w %q", wasmtool.ErrUnknownTool, req.Tool)
	}
	var a args
	if err := wasmtool.DecodeArgs(req.Args, &a); err != nil {
		return wasmtool.Result{}, err
	}
	return eval(a.Code), nil
}

// console collects console output; every line also goes to stderr so
// that a script stopped at its deadline still shows what it printed.
type console struct {
	b         strings.Builder
	truncated bool
}

func (c *console) line(level string, vm *goja.Runtime, args []goja.Value) {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = display(vm, a)
	}
	s := strings.Join(parts, " ")
	if level != "" {
		s = level + ": " + s
	}
	fmt.Fprintln(os.Stderr, s)
	if c.b.Len()+len(s)+1 > maxConsole {
		c.truncated = true
		return
	}
	c.b.WriteString(s)
	c.b.WriteByte('\n')
}

func (c *console) String() string {
	if c.truncated {
		return c.b.String() + "[console output truncated]\n"
	}
	return c.b.String()
}

// display formats a console argument like a browser would: strings as
// they are, everything else as JSON where possible.
func display(vm *goja.Runtime, v goja.Value) string {
	if v == nil || goja.IsUndefined(v) {
		return "undefined"
	}
	if s, ok := v.Export().(string); ok {
		return s
	}
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Error" {
		return o.String() // "TypeError: message"
	}
	if b, typ := stringify(vm, v); typ == "object" || typ == "number" || typ == "boolean" {
		return string(b)
	}
	return v.String()
}

// stringify renders v with JSON.stringify and reports JavaScript's typeof.
// Values JSON cannot represent (undefined, functions, symbols, cycles)
// render as null.
func stringify(vm *goja.Runtime, v goja.Value) (json.RawMessage, string) {
	typ := "undefined"
	if v != nil && !goja.IsUndefined(v) {
		typ = typeOf(v)
	}
	fn, ok := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	if !ok || typ == "undefined" {
		return json.RawMessage("null"), typ
	}
	out, err := fn(goja.Undefined(), v)
	if err != nil || out == nil || goja.IsUndefined(out) {
		return json.RawMessage("null"), typ
	}
	return json.RawMessage(out.String()), typ
}

func typeOf(v goja.Value) string {
	switch {
	case goja.IsNull(v):
		return "object"
	case v.ExportType() == nil:
		return "undefined"
	}
	if _, ok := goja.AssertFunction(v); ok {
		return "function"
	}
	switch v.Export().(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64, float64:
		return "number"
	case *goja.Symbol:
		return "symbol"
	}
	return "object"
}

// randSource is Math.random for one evaluation, seeded from crypto/rand
// (WASI random_get) when the evaluation starts. goja's default reads
// math/rand, whose state the Go runtime seeded at init: the shipped module
// is a snapshot of an initialised instance, so every instance would share
// it. With random granted, two instances' streams differ; without, the
// host's random stream is deterministic and so is this one.
func randSource() goja.RandSource {
	var seed [8]byte
	if _, err := crand.Read(seed[:]); err != nil {
		panic("js: crypto/rand: " + err.Error()) // crypto/rand never fails
	}
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:]), 0)).Float64
}

// eval runs code in a fresh runtime (the instance itself is fresh for every
// call, so nothing survives between calls).
func eval(code string) wasmtool.Result {
	if strings.TrimSpace(code) == "" {
		return wasmtool.Errorf("code is empty")
	}
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStack)
	vm.SetRandSource(randSource())
	var con console
	obj := vm.NewObject()
	for name, level := range map[string]string{"log": "", "info": "", "debug": "", "warn": "warn", "error": "error"} {
		_ = obj.Set(name, func(call goja.FunctionCall) goja.Value {
			con.line(level, vm, call.Arguments)
			return goja.Undefined()
		})
	}
	_ = vm.Set("console", obj)

	v, err := vm.RunString(code)
	var out outcome
	if err != nil {
		out.Value, out.Type = json.RawMessage("null"), "undefined"
		out.Error = describe(err)
	} else {
		if p, ok := v.Export().(*goja.Promise); ok {
			switch p.State() {
			case goja.PromiseStateFulfilled:
				v = p.Result()
			case goja.PromiseStateRejected:
				out.Error = "Uncaught (in promise) " + display(vm, p.Result())
				v = goja.Undefined()
			default:
				out.Error = "the promise is still pending when the script ends (no event loop: timers do not exist)"
			}
		}
		out.Value, out.Type = stringify(vm, v)
	}
	out.Console = con.String()
	b, mErr := json.Marshal(out)
	if mErr != nil {
		return wasmtool.Errorf("js: encode result: %v", mErr)
	}
	return wasmtool.Result{Content: string(b), IsError: out.Error != ""}
}

func describe(err error) string {
	var ex *goja.Exception
	var so *goja.StackOverflowError
	var se *goja.CompilerSyntaxError
	switch {
	case errors.As(err, &so):
		return fmt.Sprintf("RangeError: call stack exceeded %d frames", maxCallStack)
	case errors.As(err, &ex):
		return ex.String()
	case errors.As(err, &se):
		return "SyntaxError: " + se.Error()
	}
	return err.Error()
}
