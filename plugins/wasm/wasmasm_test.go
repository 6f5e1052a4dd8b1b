package wasm

import (
	"os"
	"path/filepath"
	"testing"
)

// A tiny WebAssembly assembler for fixtures that Go cannot produce (no
// loops, unknown imports, shared memory). Each fixture's WAT is in its
// comment.

const (
	i32 = 0x7f
	i64 = 0x7e
)

type asmFunc struct {
	typ  int    // index into asmModule.types
	body []byte // instructions, without the final end
}

type asmImport struct {
	module, name string
	kind         byte
	typ          int    // functions
	limits       []byte // memories
}

type asmModule struct {
	types   []funcType
	imports []asmImport
	funcs   []asmFunc
	memory  []byte // limits of the one defined memory; nil for none
	exports []asmExport
	custom  [][2]string // name, content
}

type asmExport struct {
	name  string
	kind  byte
	index int
}

func section(id byte, content []byte) []byte {
	out := []byte{id}
	out = appendULEB(out, uint64(len(content)))
	return append(out, content...)
}

func vec(n int, items ...[]byte) []byte {
	out := appendULEB(nil, uint64(n))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func wname(s string) []byte { return append(appendULEB(nil, uint64(len(s))), s...) }

// i32const encodes i32.const v (signed LEB128).
func i32const(v int32) []byte {
	out := []byte{0x41}
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func (m *asmModule) bytes() []byte {
	out := append([]byte(nil), wasmMagic...)
	if len(m.types) > 0 {
		var items [][]byte
		for _, t := range m.types {
			it := []byte{0x60}
			it = append(it, vec(len(t.params), t.params)...)
			it = append(it, vec(len(t.results), t.results)...)
			items = append(items, it)
		}
		out = append(out, section(secType, vec(len(items), items...))...)
	}
	if len(m.imports) > 0 {
		var items [][]byte
		for _, im := range m.imports {
			it := append(wname(im.module), wname(im.name)...)
			it = append(it, im.kind)
			if im.kind == externFunc {
				it = appendULEB(it, uint64(im.typ))
			} else {
				it = append(it, im.limits...)
			}
			items = append(items, it)
		}
		out = append(out, section(secImport, vec(len(items), items...))...)
	}
	if len(m.funcs) > 0 {
		var items [][]byte
		for _, f := range m.funcs {
			items = append(items, appendULEB(nil, uint64(f.typ)))
		}
		out = append(out, section(secFunction, vec(len(items), items...))...)
	}
	if m.memory != nil {
		out = append(out, section(secMemory, vec(1, m.memory))...)
	}
	if len(m.exports) > 0 {
		var items [][]byte
		for _, e := range m.exports {
			it := append(wname(e.name), e.kind)
			items = append(items, appendULEB(it, uint64(e.index)))
		}
		out = append(out, section(secExport, vec(len(items), items...))...)
	}
	if len(m.funcs) > 0 {
		var items [][]byte
		for _, f := range m.funcs {
			body := append([]byte{0x00}, f.body...) // no locals
			body = append(body, 0x0b)
			items = append(items, append(appendULEB(nil, uint64(len(body))), body...))
		}
		out = append(out, section(secCode, vec(len(items), items...))...)
	}
	for _, c := range m.custom {
		out = append(out, section(secCustom, append(wname(c[0]), c[1]...))...)
	}
	return out
}

// recursionBomb calls itself twice per level, 64 levels deep: 2^64 calls,
// no loop anywhere, so wazero's loop-header deadline check never runs
// unless the host instruments function entries.
//
//	(module
//	  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
//	  (memory (export "memory") 1)
//	  (func $bomb (param $n i32)
//	    (br_if 0 (i32.eqz (local.get $n)))
//	    (call $bomb (i32.sub (local.get $n) (i32.const 1)))
//	    (call $bomb (i32.sub (local.get $n) (i32.const 1))))
//	  (func (export "_start") (call $bomb (i32.const 64))))
func recursionBomb() []byte {
	m := asmModule{
		types:   []funcType{{params: []byte{i32}}, {}},
		imports: []asmImport{{module: wasiModule, name: "proc_exit", kind: externFunc, typ: 0}},
		funcs: []asmFunc{
			{typ: 0, body: []byte{
				0x20, 0x00, 0x45, 0x0d, 0x00, // local.get 0; i32.eqz; br_if 0
				0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x01, // local.get 0; i32.const 1; i32.sub; call 1
				0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x01, // again
			}},
			{typ: 1, body: cat(i32const(64), []byte{0x10, 0x01})}, // call 1
		},
		memory:  []byte{0x00, 0x01},
		exports: []asmExport{{"memory", externMemory, 0}, {"_start", externFunc, 2}},
	}
	return m.bytes()
}

// helloModule writes "hello" to stdout and exits 0: the smallest json-ABI
// command.
//
//	(module
//	  (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
//	  (memory (export "memory") 1)
//	  (func (export "_start")
//	    (i32.store (i32.const 0) (i32.const 16))  ;; iovec: "hello" at 16,
//	    (i32.store (i32.const 4) (i32.const 5))   ;; 5 bytes
//	    (i32.store8 (i32.const 16) (i32.const 104)) ... ;; h e l l o
//	    (drop (call $w (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
func helloModule() []byte { return textModule("hello") }

// textModule is helloModule writing text instead: each byte is an
// immediate in the code, so two texts of one length (of letters) compile
// to machine code of one layout that differs in those immediates only.
func textModule(text string) []byte {
	body := cat(i32const(0), i32const(16), []byte{0x36, 0x02, 0x00}, // i32.store (0) <- 16
		i32const(4), i32const(int32(len(text))), []byte{0x36, 0x02, 0x00}) // i32.store (4) <- len
	for i, c := range []byte(text) {
		body = cat(body, i32const(int32(16+i)), i32const(int32(c)), []byte{0x3a, 0x00, 0x00}) // i32.store8
	}
	body = cat(body, i32const(1), i32const(0), i32const(1), i32const(8), []byte{0x10, 0x00, 0x1a}) // fd_write(1, iov 0, 1, nwritten 8); drop
	m := asmModule{
		types:   []funcType{{params: []byte{i32, i32, i32, i32}, results: []byte{i32}}, {}},
		imports: []asmImport{{module: wasiModule, name: "fd_write", kind: externFunc, typ: 0}},
		funcs:   []asmFunc{{typ: 1, body: body}},
		memory:  []byte{0x00, 0x01},
		exports: []asmExport{{"memory", externMemory, 0}, {"_start", externFunc, 1}},
	}
	return m.bytes()
}

// writeModule writes a module and a json-ABI manifest with one tool named
// "run" into a new directory and returns the module's path.
func writeModule(t testing.TB, bin []byte, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(p, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if manifest == "" {
		manifest = `{"name": "fixture", "tools": [{"name": "run", "description": "Runs the module.", "tier": "read_only"}]}`
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
