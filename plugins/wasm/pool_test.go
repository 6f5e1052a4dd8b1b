package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// waitFor polls cond for up to 30s (instances take tens of milliseconds to
// initialise, much longer on a loaded machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func refillGoroutines() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "(*pool).refill")
}

// TestPool: a reactor pool fills up in the background, serves calls from
// ready instances (each once), refills, and its goroutine is gone after
// Close.
func TestPool(t *testing.T) {
	before := refillGoroutines()
	h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir})
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := load(t, h, ModuleConfig{Path: reactorWasm, Pool: 3})
	p := tools["counter"].(*tool).m.pool
	waitFor(t, "the pool to fill", func() bool { return len(p.ready) == 3 })
	for range 3 {
		if got := tools.mustCall(t, "counter", `{}`); got != "1" {
			t.Fatalf("counter %q: an instance served twice", got)
		}
	}
	if p.hits.Load() == 0 {
		t.Errorf("no call was served from the pool (%d misses)", p.misses.Load())
	}
	waitFor(t, "the pool to refill", func() bool { return len(p.ready) == 3 })
	if refillGoroutines() != before+1 {
		t.Errorf("%d refill goroutines, want %d", refillGoroutines(), before+1)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := refillGoroutines(); n != before {
		t.Fatalf("%d refill goroutines after Close, want %d", n, before)
	}
}

// TestClose: Close stops a call in flight, and every later call or load
// fails with ErrClosed.
func TestClose(t *testing.T) {
	h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir})
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := load(t, h, ModuleConfig{Path: attackWasm, Grants: Grants{Timeout: Duration(time.Minute)}})
	pooled, _ := load(t, h, ModuleConfig{Path: reactorWasm, Pool: 1})

	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		_, err := tools["loop"].Call(context.Background(), json.RawMessage(`{}`))
		done <- err
	}()
	<-started
	time.Sleep(50 * time.Millisecond) // let the guest start spinning
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close returned only after the call left (it waits for calls in
	// flight before releasing their runtime); the goroutine reports it.
	select {
	case err := <-done:
		if te := toolError(t, err); te.Code != "cancelled" || !errors.Is(err, ErrClosed) {
			t.Fatalf("the running call ended with %q (%v), want cancelled by ErrClosed", te.Code, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call Close cancelled did not return")
	}
	for _, tl := range []kernel.Tool{tools["echo"], pooled["echo"]} {
		if _, err := tl.Call(context.Background(), json.RawMessage(`{"text":"x"}`)); !errors.Is(err, ErrClosed) {
			t.Errorf("call after Close: %v, want ErrClosed", err)
		}
	}
	if _, _, err := h.Load(context.Background(), ModuleConfig{Path: attackWasm}); !errors.Is(err, ErrClosed) {
		t.Errorf("load after Close: %v, want ErrClosed", err)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
