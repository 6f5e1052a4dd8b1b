// Command precompile fills the WASM compilation cache so that later loads
// (the kernel, the tests) read compiled code instead of compiling. `make
// wasm` runs it after building the modules; the tests run it too, because
// compiling under the race detector is many times slower than here.
//
//	go run ./plugins/wasm/internal/precompile [-cache DIR] module.wasm...
//
// Every module needs its tool.json beside it. Nothing is granted: loading
// only compiles.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/agentkernel/agentkernel/plugins/wasm"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "precompile:", err)
		os.Exit(1)
	}
}

func run() error {
	cache := flag.String("cache", "", "the cache directory (default: the kernel's, "+defaultDir()+")")
	quiet := flag.Bool("q", false, "print nothing on success")
	flag.Parse()
	if flag.NArg() == 0 {
		return fmt.Errorf("no modules given; usage: precompile [-cache DIR] module.wasm")
	}
	ctx := context.Background()
	h, err := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: *cache})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	for _, p := range flag.Args() {
		start := time.Now()
		tools, _, err := h.Load(ctx, wasm.ModuleConfig{Path: p})
		if err != nil {
			return err
		}
		// Load reads the manifest only (modules compile lazily, on first
		// call); Ready compiles the module into the cache, which is this
		// program's whole job.
		for _, t := range tools[:min(1, len(tools))] {
			if err := wasm.Ready(ctx, t); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		if !*quiet {
			fmt.Printf("%s ready in %s (cache %s)\n", p, time.Since(start).Round(time.Millisecond), h.CacheDir())
		}
	}
	return nil
}

func defaultDir() string {
	d, err := wasm.DefaultCacheDir()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return d
}
