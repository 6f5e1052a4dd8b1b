package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestLoadRejects: modules and configurations the host refuses, at load
// or (for what only the binary shows) when the module is first readied,
// each with an error that says what is wrong.
func TestLoadRejects(t *testing.T) {
	h := newTestHost(t)
	hello := helloModule()
	withImport := func(module, nm string, kind byte, limits []byte) []byte {
		m := asmModule{
			types:   []funcType{{}},
			imports: []asmImport{{module: module, name: nm, kind: kind, typ: 0, limits: limits}},
			funcs:   []asmFunc{{typ: 0, body: nil}},
			exports: []asmExport{{"_start", externFunc, 1}},
		}
		if kind != externFunc {
			m.exports[0].index = 0
		}
		return m.bytes()
	}
	sharedMemory := (&asmModule{
		types:   []funcType{{}},
		funcs:   []asmFunc{{typ: 0}},
		memory:  []byte{0x03, 0x01, 0x01}, // shared, min 1, max 1
		exports: []asmExport{{"_start", externFunc, 0}},
	}).bytes()
	noStart := (&asmModule{types: []funcType{{}}, funcs: []asmFunc{{typ: 0}}}).bytes()
	bigMemory := (&asmModule{
		types:   []funcType{{}},
		funcs:   []asmFunc{{typ: 0}},
		memory:  []byte{0x00, 0x80, 0x08}, // min 1024 pages = 64 MiB
		exports: []asmExport{{"_start", externFunc, 0}},
	}).bytes()
	badSig := (&asmModule{
		types:   []funcType{{params: []byte{i64}}, {}},
		imports: []asmImport{{module: wasiModule, name: "proc_exit", kind: externFunc, typ: 0}},
		funcs:   []asmFunc{{typ: 1}},
		exports: []asmExport{{"_start", externFunc, 1}},
	}).bytes()
	reactorManifest := `{"name": "r", "abi": "reactor", "tools": [{"name": "run", "description": "x", "tier": "read_only"}]}`

	for _, tc := range []struct {
		name     string
		bin      []byte
		manifest string
		mc       func(path string) ModuleConfig
		want     []string
		sentinel error
	}{
		{name: "unknown import module", bin: withImport("env", "evil", externFunc, nil),
			want: []string{"unknown import env.evil", "only wasi_snapshot_preview1"}, sentinel: ErrModule},
		{name: "unknown WASI function", bin: withImport(wasiModule, "fd_sendfile", externFunc, nil),
			want: []string{"unknown import wasi_snapshot_preview1.fd_sendfile", "has no function"}, sentinel: ErrModule},
		{name: "imported memory", bin: withImport(wasiModule, "memory", externMemory, []byte{0x00, 0x01}),
			want: []string{"not a memory"}, sentinel: ErrModule},
		{name: "WASI import with the wrong signature", bin: badSig,
			want: []string{"proc_exit has signature (i64) -> ()", "want (i32) -> ()"}, sentinel: ErrModule},
		{name: "wasi-threads", bin: withImport("wasi", "thread-spawn", externFunc, nil),
			want: []string{"wasi.thread-spawn", "needs threads"}, sentinel: ErrModule},
		{name: "shared memory", bin: sharedMemory, want: []string{"needs threads"}, sentinel: ErrModule},
		{name: "json ABI without _start", bin: noStart, want: []string{"needs an exported function _start"}, sentinel: ErrModule},
		{name: "reactor without its exports", bin: hello, manifest: reactorManifest,
			want: []string{"reactor", "exports _start"}, sentinel: ErrModule},
		{name: "initial memory over the cap", bin: bigMemory,
			mc:   func(p string) ModuleConfig { return ModuleConfig{Path: p, Grants: Grants{MemoryMB: 16}} },
			want: []string{"memory starts at 64 MiB", "memory_mb 16"}, sentinel: ErrModule},
		{name: "not WebAssembly", bin: []byte("#!/bin/sh\n"), want: []string{"no \\0asm magic"}, sentinel: ErrModule},
		{name: "pinned hash differs", bin: hello,
			mc:   func(p string) ModuleConfig { return ModuleConfig{Path: p, SHA256: strings.Repeat("ab", 32)} },
			want: []string{"sha256", "is pinned but the file's sha256 is"}, sentinel: ErrConfig},
		{name: "manifest pin differs", bin: hello,
			manifest: `{"name": "x", "sha256": "` + strings.Repeat("0", 64) + `", "tools": [{"name": "run", "description": "x", "tier": "read_only"}]}`,
			want:     []string{"tool.json", "sha256", "is pinned"}, sentinel: ErrManifest},
		{name: "pool on a json module", bin: hello,
			mc:   func(p string) ModuleConfig { return ModuleConfig{Path: p, Pool: 2} },
			want: []string{"pool: only reactor modules can be pooled"}, sentinel: ErrConfig},
		{name: "granted host directory missing", bin: hello,
			manifest: `{"name": "x", "tools": [{"name": "run", "description": "x", "tier": "read_only"}], "capabilities": {"fs": [{"guest": "/data"}]}}`,
			mc: func(p string) ModuleConfig {
				return ModuleConfig{Path: p, Grants: Grants{FS: []FSGrant{{Guest: "/data", Host: filepath.Join(t.TempDir(), "missing")}}}}
			},
			want: []string{"grants.fs[0].host"}, sentinel: ErrConfig},
		{name: "guest path not clean", bin: hello,
			mc: func(p string) ModuleConfig {
				return ModuleConfig{Path: p, Grants: Grants{FS: []FSGrant{{Guest: "/data/../etc", Host: t.TempDir()}}}}
			},
			want: []string{"grants.fs[0].guest", "not clean"}, sentinel: ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeModule(t, tc.bin, tc.manifest)
			mc := ModuleConfig{Path: p}
			if tc.mc != nil {
				mc = tc.mc(p)
			}
			tools, _, err := loadReady(h, mc)
			if err == nil {
				t.Fatalf("loaded %d tools; want an error", len(tools))
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tc.sentinel)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadMissingManifest(t *testing.T) {
	h := newTestHost(t)
	p := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(p, helloModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := h.Load(context.Background(), ModuleConfig{Path: p})
	if err == nil || !strings.Contains(err.Error(), "needs a tool.json beside it") {
		t.Fatalf("error %v, want one naming the missing tool.json", err)
	}
}

func TestHelloModule(t *testing.T) {
	h := newTestHost(t)
	tools, warnings := load(t, h, ModuleConfig{Path: writeModule(t, helloModule(), "")})
	if len(warnings) != 0 {
		t.Errorf("warnings %q, want none", warnings)
	}
	spec := tools["run"].Spec()
	if spec.Source != "wasm:fixture" || spec.Timeout != DefaultTimeout || spec.Tier != "read_only" {
		t.Errorf("spec = %+v", spec)
	}
	if got := tools.mustCall(t, "run", `{}`); got != "hello" {
		t.Fatalf("result %q, want plain-text stdout %q", got, "hello")
	}
}

// TestRecursionBomb: a loop-free recursion never reaches a loop header, where
// wazero checks its deadline. The host's entry checks stop it anyway.
func TestRecursionBomb(t *testing.T) {
	h := newTestHost(t)
	tools, _ := load(t, h, ModuleConfig{Path: writeModule(t, recursionBomb(), ""),
		Grants: Grants{Timeout: Duration(300 * time.Millisecond)}})
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := tools.call(t, "run", `{}`)
		done <- err
	}()
	select {
	case err := <-done:
		if te := toolError(t, err); te.Code != "timeout" {
			t.Fatalf("code %q (%v), want timeout", te.Code, err)
		}
		t.Logf("stopped %s after the call began (deadline 300ms)", time.Since(start))
	case <-time.After(20 * time.Second):
		t.Fatal("the recursion bomb was not stopped: function entries are not checked")
	}
	// The host is healthy: the same module's instrumented sibling runs.
	hello, _ := load(t, h, ModuleConfig{Path: writeModule(t, helloModule(), "")})
	hello.mustCall(t, "run", `{}`)
}

// TestRegistersWithKernel: the tools are what the kernel's registry
// expects: valid names, tiers and schemas, and the source wasm:<module>.
func TestRegistersWithKernel(t *testing.T) {
	h := newTestHost(t)
	tools, _, err := h.Load(context.Background(), ModuleConfig{Path: attackWasm, Name: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	spec, ok := reg.Spec("fs")
	if !ok || spec.Source != "wasm:fixture" || spec.Tier != kernel.TierSideEffecting || spec.Timeout != DefaultTimeout {
		t.Fatalf("spec %+v", spec)
	}
	if _, err := reg.Validate("echo", json.RawMessage(`{"text": 3}`)); !errors.Is(err, kernel.ErrInvalidArgs) {
		t.Fatalf("the manifest's schema is not enforced: %v", err)
	}
}
