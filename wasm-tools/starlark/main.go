// Command starlark is a WASM tool (GOOS=wasip1) that runs Starlark the
// model writes (go.starlark.net: a Python dialect designed for hermetic,
// deterministic evaluation) and returns the script's result and what it
// printed: a sandboxed code interpreter. Built by `make wasm` as a
// reactor, so that the host keeps instances with the interpreter already
// initialised in a pool:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -o wasm-tools/starlark/starlark.wasm ./wasm-tools/starlark
//
// Built without -buildmode=c-shared it is a json-ABI command (change "abi"
// in tool.json to match).
//
// Two budgets stop a runaway script: the interpreter's own execution step
// cap (maxSteps), which ends the script with an error result that keeps
// what it printed, and the host's timeout and memory_mb, which end the
// instance (every printed line also goes to stderr, so the host's error
// shows it).
package main

import "github.com/agentkernel/agentkernel/sdk/wasmtool"

// init registers the handler (a reactor instance never runs main) and a
// warm-up that a pooled instance runs before its call: one evaluation
// touches the parser, resolver, compiler and the json module.
func init() {
	wasmtool.Handle(handle)
	wasmtool.Warm(func() { run(`result = json.encode({"a": [x * x for x in range(3)]})`, nil) })
}

func main() { wasmtool.Main() }
