package wasm

import (
	"context"
	"sync"
	"testing"
)

// TestCompilingReported: a module's load tells HostConfig.Compiling that
// it compiles (the CLI's status line for a cold cache), by the module's
// name, and ends it when the module is ready; a second load of the same
// host does not compile again.
func TestCompilingReported(t *testing.T) {
	var mu sync.Mutex
	var started, ended []string
	h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir, Compiling: func(module string) func() {
		mu.Lock()
		started = append(started, module)
		mu.Unlock()
		return func() {
			mu.Lock()
			ended = append(ended, module)
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	tools, _, err := loadReady(h, ModuleConfig{Path: attackWasm, Name: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Ready(context.Background(), tools[0]); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 1 || started[0] != "fixture" || len(ended) != 1 || ended[0] != "fixture" {
		t.Fatalf("Compiling saw starts %v and ends %v; want fixture once each", started, ended)
	}
}
