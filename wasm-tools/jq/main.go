// Command jq is a WASM tool (GOOS=wasip1) that runs jq queries with
// github.com/itchyny/gojq over JSON the model passes or over files in a
// directory the operator mounted. Built by `make wasm`:
//
//	GOOS=wasip1 GOARCH=wasm go build -o wasm-tools/jq/jq.wasm ./wasm-tools/jq
//
// The same main serves the json ABI and, built with -buildmode=c-shared,
// the reactor ABI (see sdk/wasmtool).
package main

import "github.com/agentkernel/agentkernel/sdk/wasmtool"

// init registers the handler (a reactor instance never runs main) and a
// warm-up for reactor builds.
func init() {
	wasmtool.Handle(handle)
	wasmtool.Warm(func() { _, _ = run(args{Filter: ".a", Input: []byte(`{"a":1}`)}) })
}

func main() { wasmtool.Main() }
