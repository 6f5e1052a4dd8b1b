package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestLazyLoad: Load reads the manifest only. A module whose binary is
// not WebAssembly at all loads, registers its tools and is not touched
// until its first call, which fails with the reason (as every later call
// does, without reading it again); the tool then reports unhealthy.
func TestLazyLoad(t *testing.T) {
	h := newTestHost(t)
	p := writeModule(t, []byte("#!/bin/sh\necho not wasm\n"), "")
	tools, _, err := h.Load(context.Background(), ModuleConfig{Path: p})
	if err != nil {
		t.Fatalf("Load read the binary: %v", err)
	}
	m := tools[0].(*tool).m
	if m.started.Load() {
		t.Fatal("Load started loading the module")
	}
	if health, _ := Health(tools[0]); health != "" {
		t.Fatalf("health %q before any call, want healthy", health)
	}
	for range 2 {
		res, err := tools[0].Call(context.Background(), json.RawMessage(`{}`))
		if te := toolError(t, err); te.Code != "unavailable" || !errors.Is(err, ErrModule) || !strings.Contains(res.Content, "no \\0asm magic") {
			t.Fatalf("%+v, %v; want unavailable naming the bad binary", res, err)
		}
	}
	if health, _ := Health(tools[0]); !strings.Contains(health, "unhealthy: load wasm module fixture") {
		t.Fatalf("health %q, want unhealthy", health)
	}
}

// TestFiftyParallelCalls: 50 calls of a trivial tool at once all succeed:
// max_concurrency queues them instead of letting 50 instances fight over
// the CPU until their deadlines. The deadline is generous for -race on a
// loaded machine; the point is that none is lost.
func TestFiftyParallelCalls(t *testing.T) {
	h := newTestHost(t)
	tools, _ := load(t, h, ModuleConfig{Path: reactorWasm, Pool: 2, MaxConcurrency: 2, Grants: Grants{Timeout: Duration(5 * time.Minute)}})
	m := tools["echo"].(*tool).m
	errs := make([]error, 50)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			res, err := tools["echo"].Call(context.Background(), json.RawMessage(`{"text":"ok"}`))
			if err == nil && res.Content != "ok" {
				err = fmt.Errorf("result %q", res.Content)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if len(m.slots) != 0 || cap(m.slots) != 2 {
		t.Fatalf("slots %d/%d after the calls, want 0/2", len(m.slots), cap(m.slots))
	}
}
