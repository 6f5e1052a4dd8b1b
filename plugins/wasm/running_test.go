package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestMaxRunning: with every run slot of the host taken by a runaway, a
// call of another module waits in line and fails at its deadline as a
// timeout naming the limit; once the runaway is stopped the call runs.
func TestMaxRunning(t *testing.T) {
	h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir, MaxRunning: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	attack, _ := load(t, h, ModuleConfig{Path: attackWasm, Grants: Grants{MemoryMB: 32, Timeout: Duration(time.Minute)}})
	hello, _ := load(t, h, ModuleConfig{Path: writeModule(t, helloModule(), "")})

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := attack["loop"].Call(ctx, json.RawMessage(`{}`))
		done <- err
	}()
	waitFor(t, "the runaway to take the run slot", func() bool { return len(h.running) == 1 })

	wctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = hello["run"].Call(wctx, json.RawMessage(`{}`))
	if te := toolError(t, err); te.Code != "timeout" || !errors.Is(err, kernel.ErrToolTimeout) || !strings.Contains(err.Error(), "limits.wasm_max_running") {
		t.Fatalf("code %q, error %v; want a timeout naming the run slots", te.Code, err)
	}

	stop()
	if err := <-done; err == nil {
		t.Fatal("the runaway returned")
	}
	if got := hello.mustCall(t, "run", `{}`); got != "hello" {
		t.Fatalf("result %q", got)
	}
}
