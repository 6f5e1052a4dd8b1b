package wasm

import (
	"errors"
	"strings"
	"testing"
)

// growModule asks for pages more pages in one memory.grow and exits 0
// whatever the answer: only the host can make it fail.
//
//	(module
//	  (memory (export "memory") 1)
//	  (func (export "_start") (drop (memory.grow (i32.const pages)))))
func growModule(pages int32) []byte {
	m := asmModule{
		types:   []funcType{{}},
		funcs:   []asmFunc{{typ: 0, body: cat(i32const(pages), []byte{0x40, 0x00, 0x1a})}}, // memory.grow 0; drop
		memory:  []byte{0x00, 0x01},
		exports: []asmExport{{"memory", externMemory, 0}, {"_start", externFunc, 0}},
	}
	return m.bytes()
}

// TestSingleGrowPastTheCap: one memory.grow far past memory_mb (three
// times the cap, past any backstop at twice it) is reported as
// memory_limit, not left to the guest to fail on as out of memory; a grow
// within the cap succeeds.
func TestSingleGrowPastTheCap(t *testing.T) {
	h := newTestHost(t)
	grants := Grants{MemoryMB: 1} // 16 pages
	over, _ := load(t, h, ModuleConfig{Path: writeModule(t, growModule(3*16), ""), Grants: grants})
	res, err := over.call(t, "run", `{}`)
	if te := toolError(t, err); te.Code != "memory_limit" || !errors.Is(err, ErrMemoryLimit) || !res.IsError || !strings.Contains(res.Content, "1 MiB") {
		t.Fatalf("%+v, %v; want memory_limit naming the 1 MiB cap", res, err)
	}
	within, _ := load(t, h, ModuleConfig{Path: writeModule(t, growModule(15), ""), Grants: grants})
	within.mustCall(t, "run", `{}`)
}
