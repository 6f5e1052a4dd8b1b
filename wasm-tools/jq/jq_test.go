package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/plugins/wasm"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
	"github.com/agentkernel/agentkernel/sdk/wasmtool"
)

// module is the jq.wasm the tests built (wasmtest.BuildTool).
var module string

func TestMain(m *testing.M) {
	var err error
	// Built into the tests' own directory: wasm-tools/jq/jq.wasm is
	// make's, precompiled for the kernel and the demo.
	module, err = wasmtest.BuildTool("../..", "wasm-tools/jq", ".", "jq.wasm", false)
	if err == nil {
		err = wasmtest.Precompile("../..", module)
	}
	if err != nil { // a failed precompile was ignored before
		fmt.Fprintln(os.Stderr, "wasm-tools/jq tests: setup:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestRun checks the query logic natively (the same code the module runs).
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		args args
		want string
		bad  bool
	}{
		{"identity", args{Filter: ".", Input: json.RawMessage(`{"a": 1}`)}, "{\"a\":1}\n", false},
		{"select", args{Filter: `[.[] | select(.p > 10) | .n]`, Input: json.RawMessage(`[{"n":"a","p":5},{"n":"b","p":20}]`)}, "[\"b\"]\n", false},
		{"several results", args{Filter: ".[]", Input: json.RawMessage(`[1, 2.5, 12345678901234567890]`)}, "1\n2.5\n12345678901234567890\n", false},
		{"raw strings", args{Filter: ".[]", Input: json.RawMessage(`["x", "y"]`), Raw: true}, "x\ny\n", false},
		{"null input", args{Filter: "1 + 1"}, "2\n", false},
		{"parse error", args{Filter: ".[", Input: json.RawMessage(`1`)}, "jq: parse", true},
		{"runtime error", args{Filter: ".a.b", Input: json.RawMessage(`{"a": 5}`)}, "jq: error: expected an object but got: number (5)", true},
		{"limit", args{Filter: "range(10)", Limit: 3}, "0\n1\n2\njq: stopped after 3 results (limit)", true},
		{"input and file", args{Filter: ".", Input: json.RawMessage(`1`), File: "/x"}, "not both", true},
		{"halt", args{Filter: "1, halt, 2"}, "1\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tc.bad || !strings.Contains(res.Content, tc.want) {
				t.Fatalf("result %+v, want is_error=%v containing %q", res, tc.bad, tc.want)
			}
		})
	}
}

func TestUnknownTool(t *testing.T) {
	if _, err := handle(wasmtool.Request{Tool: "nope"}); err == nil {
		t.Fatal("want an error")
	}
}

// TestModule runs jq.wasm in the sandbox: JSON from the call, a file from
// the mounted /data, and a file outside every mount.
func TestModule(t *testing.T) {
	ctx := context.Background()
	h, err := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: wasmtest.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "orders.json"), []byte(`{"id":1,"total":30} {"id":2,"total":5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tools, warnings, err := h.Load(ctx, wasm.ModuleConfig{Path: module, Grants: wasm.Grants{
		FS: []wasm.FSGrant{{Guest: "/data", Host: data}}, MemoryMB: 128,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 || len(tools) != 1 {
		t.Fatalf("%d tools, warnings %q", len(tools), warnings)
	}
	if err := wasm.Ready(ctx, tools[0]); err != nil {
		t.Fatal(err)
	}
	jq := tools[0]
	if caps, _ := wasm.Capabilities(jq); caps != "fs=/data:ro memory=128MiB timeout=5s output=256KiB" {
		t.Errorf("capabilities %q", caps)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"filter": ".a", "input": {"a": [1, 2]}}`, "[1,2]\n"},
		{`{"filter": "select(.total > 10) | .id", "file": "/data/orders.json"}`, "1\n"},
	} {
		res, err := jq.Call(ctx, json.RawMessage(tc.args))
		if err != nil || res.IsError || res.Content != tc.want {
			t.Errorf("%s: %+v, %v; want %q", tc.args, res, err, tc.want)
		}
	}
	res, err := jq.Call(ctx, json.RawMessage(`{"filter": ".", "file": "/etc/passwd"}`))
	if err != nil || !res.IsError || !strings.Contains(res.Content, "mounted") {
		t.Errorf("reading outside the mounts: %+v, %v", res, err)
	}
}
