package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

// The modules the tests run, built by `make wasm` or, when missing or
// stale, by TestMain (go build is a no-op when they are up to date).
const (
	attackWasm  = "testdata/attack/attack.wasm"
	reactorWasm = "testdata/reactor/reactor.wasm"
)

// gojqWasm is gojq's command line as the tests build it, in their own
// directory (wasmtest.BuildTool): wasm-tools/gojq/gojq.wasm is make's.
var gojqWasm string

// testCacheDir is the compilation cache every test shares (see wasmtest).
var testCacheDir string

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "plugins/wasm tests: setup:", err)
		os.Exit(1)
	}
	code := m.Run()
	if sharedAttack.h != nil {
		if err := sharedAttack.h.Close(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "close the shared host:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func setup() error {
	testCacheDir = wasmtest.CacheDir()
	if os.Getenv(budgetChildEnv) == "1" {
		return nil // it builds its own module
	}
	if err := wasmtest.Build(".", attackWasm, "./testdata/attack", false); err != nil {
		return err
	}
	if err := wasmtest.Build(".", reactorWasm, "./testdata/attack", true); err != nil {
		return err
	}
	// An unmodified upstream CLI (gojq's), built from the module proxy at
	// the version pinned in wasm-tools/gojq/go.mod.
	var err error
	if gojqWasm, err = wasmtest.BuildTool("../..", "wasm-tools/gojq", "github.com/itchyny/gojq/cmd/gojq", "gojq.wasm", false); err != nil {
		return err
	}
	return wasmtest.Precompile("../..", "plugins/wasm/"+attackWasm, "plugins/wasm/"+reactorWasm, gojqWasm)
}

// wazeroSeenVersion is the version wazero reports in this binary.
func wazeroSeenVersion() string { return wasmtest.SeenWazeroVersion() }

// newTestHost is a Host on the shared cache, closed when the test ends.
func newTestHost(t testing.TB) *Host {
	t.Helper()
	h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close host: %v", err)
		}
	})
	return h
}

// loaded is a module's tools by name.
type loaded map[string]kernel.Tool

func load(t testing.TB, h *Host, mc ModuleConfig) (loaded, []string) {
	t.Helper()
	tools, warnings, err := loadReady(h, mc)
	if err != nil {
		t.Fatalf("load %s: %v", mc.Path, err)
	}
	out := loaded{}
	for _, tl := range tools {
		out[tl.Spec().Name] = tl
	}
	return out, warnings
}

// loadReady loads a module and, unlike Load alone, compiles it, so that
// every error Load defers to the first call is returned here.
func loadReady(h *Host, mc ModuleConfig) ([]kernel.Tool, []string, error) {
	tools, warnings, err := h.Load(context.Background(), mc)
	if err == nil && len(tools) > 0 {
		err = Ready(context.Background(), tools[0])
	}
	return tools, warnings, err
}

func (l loaded) call(t testing.TB, name, args string) (kernel.Result, error) {
	t.Helper()
	tl, ok := l[name]
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	return tl.Call(context.Background(), json.RawMessage(args))
}

// mustCall calls a tool that must succeed.
func (l loaded) mustCall(t testing.TB, name, args string) string {
	t.Helper()
	res, err := l.call(t, name, args)
	if err != nil || res.IsError {
		t.Fatalf("%s %s: result %q, error %v", name, args, res.Content, err)
	}
	return res.Content
}

// sharedAttack is the attack module loaded once with the grants most tests
// use; tests that need other grants load their own.
var sharedAttack struct {
	once  sync.Once
	h     *Host
	tools loaded
	err   error
}

const sharedTimeout = 1500 * time.Millisecond

func attackTools(t testing.TB) loaded {
	t.Helper()
	sharedAttack.once.Do(func() {
		h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir})
		if err != nil {
			sharedAttack.err = err
			return
		}
		sharedAttack.h = h
		tools, _, err := loadReady(h, ModuleConfig{Path: attackWasm, Grants: Grants{
			Timeout: Duration(sharedTimeout), MemoryMB: 32, MaxOutputBytes: 64 << 10,
		}})
		if err != nil {
			sharedAttack.err = err
			return
		}
		sharedAttack.tools = loaded{}
		for _, tl := range tools {
			sharedAttack.tools[tl.Spec().Name] = tl
		}
	})
	if sharedAttack.err != nil {
		t.Fatal(sharedAttack.err)
	}
	return sharedAttack.tools
}

// toolError returns err's *kernel.ToolError or fails the test.
func toolError(t testing.TB, err error) *kernel.ToolError {
	t.Helper()
	var te *kernel.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *kernel.ToolError", err, err)
	}
	return te
}
