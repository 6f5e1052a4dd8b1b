package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/wasm"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

// module is the js.wasm the tests built (wasmtest.BuildTool, then
// wasmtest.Snapshot); raw is the reactor it was made from.
var module, raw string

func TestMain(m *testing.M) {
	var err error
	// Built into the tests' own directory: wasm-tools/js/js.wasm is
	// make's, precompiled for the kernel and the demo.
	// The tests run what make ships: the snapshot (pre-initialised
	// image) of the reactor, made by the same tool.
	raw, err = wasmtest.BuildTool("../..", "wasm-tools/js", ".", "js-raw.wasm", true)
	if err == nil {
		module = filepath.Join(filepath.Dir(raw), "js.wasm")
		err = wasmtest.Snapshot("../..", raw, module)
	}
	if err == nil {
		err = wasmtest.Precompile("../..", module)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasm-tools/js tests: setup:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func decode(t *testing.T, content string) outcome {
	t.Helper()
	var o outcome
	if err := json.Unmarshal([]byte(content), &o); err != nil {
		t.Fatalf("content %q is not an outcome: %v", content, err)
	}
	return o
}

// TestEval checks the interpreter natively (the same code the module runs).
func TestEval(t *testing.T) {
	for _, tc := range []struct {
		name, code     string
		value, typ     string
		console, error string
	}{
		{name: "expression", code: "1 + 2", value: "3", typ: "number"},
		{name: "object", code: "({a: [1, 2], b: 'x'})", value: `{"a":[1,2],"b":"x"}`, typ: "object"},
		{name: "es6", code: "const sq = x => x * x; [1, 2, 3].map(sq)", value: "[1,4,9]", typ: "object"},
		{name: "console", code: "console.log('n =', 3, {k: true}); console.error('bad'); 'done'",
			value: `"done"`, typ: "string", console: "n = 3 {\"k\":true}\nerror: bad\n"},
		{name: "undefined", code: "var x = 1;", value: "null", typ: "undefined"},
		{name: "function", code: "(function f() {})", value: "null", typ: "function"},
		{name: "exception", code: "console.log('before'); throw new TypeError('nope')", value: "null", typ: "undefined",
			console: "before\n", error: "TypeError: nope"},
		{name: "syntax error", code: "let = ;", value: "null", typ: "undefined", error: "SyntaxError"},
		{name: "recursion", code: "function f(n) { return f(n + 1) } f(0)", value: "null", typ: "undefined", error: "RangeError"},
		{name: "resolved promise", code: "Promise.resolve(42)", value: "42", typ: "number"},
		{name: "rejected promise", code: "Promise.reject(new Error('no'))", value: "null", typ: "undefined", error: "Uncaught (in promise) Error: no"},
		{name: "no host access", code: "typeof require + ' ' + typeof process + ' ' + typeof setTimeout", value: `"undefined undefined undefined"`, typ: "string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := eval(tc.code)
			o := decode(t, res.Content)
			if string(o.Value) != tc.value || o.Type != tc.typ || o.Console != tc.console || !strings.Contains(o.Error, tc.error) || res.IsError != (tc.error != "") {
				t.Fatalf("got %+v (is_error %v)\nwant value %s type %s console %q error %q", o, res.IsError, tc.value, tc.typ, tc.console, tc.error)
			}
		})
	}
}

// TestModule runs js.wasm in the sandbox: a script, then a runaway loop
// stopped by the time budget with its console output in the error, then a
// memory hog stopped by the memory budget, and the tool still works.
func TestModule(t *testing.T) {
	ctx := context.Background()
	h, err := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: wasmtest.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	tools, _, err := h.Load(ctx, wasm.ModuleConfig{Path: module, Pool: 1, Grants: wasm.Grants{MemoryMB: 96, Timeout: wasm.Duration(2 * time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	// Load is lazy; compile now so that the calls' deadlines measure calls.
	if err := wasm.Ready(ctx, tools[0]); err != nil {
		t.Fatal(err)
	}
	js := tools[0]
	call := func(ctx context.Context, code string) (kernel.Result, error) {
		args, _ := json.Marshal(map[string]string{"code": code})
		return js.Call(ctx, args)
	}

	res, err := call(ctx, "console.log('hi'); [1, 2, 3].reduce((a, b) => a + b)")
	if err != nil || res.IsError {
		t.Fatalf("%+v, %v", res, err)
	}
	if o := decode(t, res.Content); string(o.Value) != "6" || o.Console != "hi\n" {
		t.Fatalf("outcome %+v", o)
	}

	// Long enough that a loaded machine still runs the console.log before
	// the deadline (the cause asserted is the timeout, with the output
	// written before it); the loop spins until then.
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err = call(tctx, "console.log('spinning'); for (;;) {}")
	var te *kernel.ToolError
	if !errorsAs(err, &te) || te.Code != "timeout" || !strings.Contains(res.Content, "spinning") {
		t.Fatalf("runaway loop: %+v, %v; want a timeout showing the console output", res, err)
	}

	res, err = call(ctx, "let a = []; for (;;) { a.push(new Uint8Array(1 << 24)) }")
	if !errorsAs(err, &te) || te.Code != "memory_limit" || !res.IsError {
		t.Fatalf("memory hog: %+v, %v; want memory_limit", res, err)
	}

	if res, err := call(ctx, "'still here'"); err != nil || decode(t, res.Content).Value == nil {
		t.Fatalf("after the attacks: %+v, %v", res, err)
	}
}

func errorsAs(err error, te **kernel.ToolError) bool {
	if err == nil {
		return false
	}
	e, ok := err.(*kernel.ToolError)
	if ok {
		*te = e
	}
	return ok
}
