package wasm

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseWasm(t *testing.T) {
	info, err := parseWasm(recursionBomb())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.imports) != 1 || info.imports[0].name != "proc_exit" || info.imports[0].kind != externFunc {
		t.Errorf("imports = %+v", info.imports)
	}
	if info.bodies != 2 || info.importedFuncs() != 1 {
		t.Errorf("bodies = %d, imported functions = %d", info.bodies, info.importedFuncs())
	}
	sig, ok := info.exportedFunc("_start")
	if !ok || len(sig.params) != 0 || len(sig.results) != 0 {
		t.Errorf("_start = %v, %v", sig, ok)
	}
	if sig, ok := info.exportedFunc("proc_exit"); ok {
		t.Errorf("proc_exit is not exported, got %v", sig)
	}
	if info.minPages != 1 || info.shared {
		t.Errorf("memory: min %d pages, shared %v", info.minPages, info.shared)
	}
}

func TestParseWasmRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		bin  []byte
		want string
	}{
		{"empty", nil, "no \\0asm magic"},
		{"text", []byte("(module)"), "no \\0asm magic"},
		{"component", []byte{0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00}, "components are not supported"},
		{"truncated section", append(append([]byte{}, wasmMagic...), secType, 0x10, 0x01), "unexpected end"},
		{"bad value type", (&asmModule{types: []funcType{{params: []byte{0x55}}}}).bytes(), "unknown value type 0x55"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseWasm(tc.bin)
			if err == nil || !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want errMalformed mentioning %q", err, tc.want)
			}
		})
	}
}

func TestInstrument(t *testing.T) {
	loopFirst := []byte{0x23, 0x00, 0x21, 0x01, 0x02, 0x40, 0x03, 0x40, 0x10, 0x00, 0x0b, 0x0b} // global.get; local.set; block; loop; call 0; end; end
	for _, tc := range []struct {
		name    string
		body    []byte
		changed bool
	}{
		{"leaf without calls", []byte{0x41, 0x01, 0x1a}, false},
		{"call without loop", []byte{0x10, 0x00}, true},
		{"call before loop", []byte{0x10, 0x00, 0x03, 0x40, 0x0b}, true},
		{"Go-shaped: straight line, then loop", loopFirst, false},
		{"branch before loop", []byte{0x20, 0x00, 0x04, 0x40, 0x10, 0x00, 0x0b, 0x03, 0x40, 0x0b}, true},
		{"call byte in an immediate", []byte{0x41, 0x10, 0x1a}, false},
		{"call after memory ops", []byte{0x41, 0x00, 0x28, 0x02, 0x10, 0x1a, 0xfd, 0x0c, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1a, 0x10, 0x00}, true},
		{"return_call", []byte{0x12, 0x00}, true},
		// an opcode the decoder does not know: instrumenting is the safe side
		{"unknown opcode", []byte{0xfb, 0x01, 0x1a}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := asmModule{
				types:   []funcType{{}},
				imports: []asmImport{{module: wasiModule, name: "sched_yield", kind: externFunc, typ: 0}},
				funcs:   []asmFunc{{typ: 0, body: tc.body}},
				custom:  [][2]string{{".debug_info", "x"}, {"name", "y"}},
			}
			bin := m.bytes()
			info, err := parseWasm(bin)
			if err != nil {
				t.Fatal(err)
			}
			out, n, err := instrument(bin, info)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.changed {
				if n != 0 || !bytes.Equal(out, bin) {
					t.Fatalf("changed %d bodies; want the binary untouched", n)
				}
				return
			}
			if n != 1 {
				t.Fatalf("changed %d bodies, want 1", n)
			}
			info2, err := parseWasm(out)
			if err != nil {
				t.Fatalf("instrumented binary does not parse: %v", err)
			}
			r := &reader{b: out[:info2.codeEnd], off: info2.codeStart}
			r.u32() // count
			size, _ := r.u32()
			body := out[r.off : r.off+int(size)]
			want := append(append([]byte{0x00}, entryCheck...), tc.body...)
			want = append(want, 0x0b)
			if !bytes.Equal(body, want) {
				t.Fatalf("body % x, want % x", body, want)
			}
			if bytes.Contains(out, []byte(".debug_info")) || !bytes.Contains(out, []byte("name")) {
				t.Error("want DWARF sections dropped and others kept")
			}
		})
	}
}

// TestInstrumentGoModule checks the shape the instrumentation relies on:
// the Go functions that call others begin with a straight line and a loop,
// so a Go module is mostly left alone.
func TestInstrumentGoModule(t *testing.T) {
	bin, err := os.ReadFile(attackWasm)
	if err != nil {
		t.Fatal(err)
	}
	info, err := parseWasm(bin)
	if err != nil {
		t.Fatal(err)
	}
	out, n, err := instrument(bin, info)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || n > info.bodies/2 {
		t.Errorf("instrumented %d of %d bodies; want some, and fewer than half", n, info.bodies)
	}
	if _, err := parseWasm(out); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseWasm(f *testing.F) {
	f.Add(recursionBomb())
	f.Add(helloModule())
	f.Add([]byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x0a, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := parseWasm(b)
		if err != nil {
			return
		}
		out, _, err := instrument(b, info)
		if err != nil {
			return
		}
		info2, err := parseWasm(out)
		if err != nil {
			t.Fatalf("instrumented output does not parse: %v", err)
		}
		if info2.bodies != info.bodies || len(info2.imports) != len(info.imports) {
			t.Fatalf("instrumenting changed the module's shape")
		}
	})
}
