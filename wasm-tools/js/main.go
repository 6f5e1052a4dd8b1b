// Command js is a WASM tool (GOOS=wasip1) that evaluates JavaScript the
// model writes with github.com/dop251/goja and returns the value of the
// last expression and what the code printed with console.*: a sandboxed
// code interpreter. Built by `make wasm` as a reactor, so that the host can
// keep instances with goja already initialised in a pool:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bin/wasm/js-raw.wasm ./wasm-tools/js
//	go run ./plugins/wasm/internal/snapshot -o wasm-tools/js/js.wasm bin/wasm/js-raw.wasm
//
// The second step writes its pre-initialised image (a snapshot: the host
// skips _initialize and the warm-up; docs/wasm.md).
//
// Built without -buildmode=c-shared it is a json-ABI command (change "abi"
// in tool.json to match).
// Its time and memory budget are the host's: the module's timeout stops a
// runaway script (console output printed so far is in the error, because
// every console line also goes to stderr) and memory_mb caps the heap.
package main

import "github.com/agentkernel/agentkernel/sdk/wasmtool"

// init registers the handler (a reactor instance never runs main) and a
// warm-up that a pooled instance runs before its call: one evaluation
// builds goja's caches.
func init() {
	wasmtool.Handle(handle)
	wasmtool.Warm(func() { eval("[1].map(x => x + 1)") })
}

func main() { wasmtool.Main() }
