// Package wasm runs tools compiled to WebAssembly (WASI preview1) in a
// deny-by-default sandbox on wazero, as kernel.Tools.
//
// A module is a .wasm file with a tool.json manifest beside it
// (schemas/tool-manifest.schema.json): the tools it offers and the
// capabilities it requests. The operator grants capabilities in kernel.yaml
// (tools.wasm, decoded into ModuleConfig); a module gets the intersection,
// and every request that was not granted comes back from Load as a warning.
//
// # Lifecycle
//
//  1. NewHost prepares the compilation cache directory (0700).
//  2. Load reads the module and its manifest, checks the pins, the imports
//     (WASI preview1 functions only, with their exact signatures; no
//     threads) and the ABI's entry points, instruments function entries so
//     a loop-free recursion still meets its deadline, opens the granted
//     directories with os.Root, and compiles the module, reading compiled
//     code from the cache when it is there and verifies. Reactor modules
//     with a pool start a goroutine that keeps initialised instances ready.
//  3. Tool.Call runs one call in a fresh instance (a pre-warmed one for
//     pooled reactors), with the deadline, memory cap, output caps, mounts,
//     environment, clock and randomness of the effective capabilities, and
//     discards the instance afterwards: nothing carries over between calls.
//  4. Close cancels the calls in flight, waits for them and for the pool
//     goroutines, and releases every runtime and directory.
//
// # ABIs
//
//   - json (default): a WASI command; the request {"tool","args"} on stdin,
//     the result {"content","is_error"} (or plain text) on stdout; a
//     non-zero exit is a failed call carrying the start and end of stderr.
//   - reactor: the module exports agentkernel_alloc and agentkernel_call;
//     the host passes the same request through guest memory. Go tools get
//     both from sdk/wasmtool.
//   - argv: an unmodified WASI program; templates in the manifest turn the
//     arguments into argv and stdin, stdout is the result.
//
// See docs/wasm.md for the operator's guide and the threat model, and
// wasm-tools/README.md for writing tools.
package wasm
