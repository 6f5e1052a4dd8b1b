// Command precompile fills the WASM compilation cache so that later loads
// (the kernel, the tests) read compiled code instead of compiling. `make
// wasm` runs it after building the modules; the tests run it too, because
// compiling under the race detector is many times slower than here.
//
//	go run ./plugins/wasm/internal/precompile [-cache DIR] [-j N] module.wasm...
//
// Every module needs its tool.json beside it. Nothing is granted: loading
// only compiles. wazero compiles a module on one core, so the modules are
// compiled side by side, -j at a time (default: one per core).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

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
	jobs := flag.Int("j", runtime.GOMAXPROCS(0), "how many modules to compile at once")
	flag.Parse()
	if flag.NArg() == 0 {
		return fmt.Errorf("no modules given; usage: precompile [-cache DIR] [-j N] module.wasm")
	}
	if *jobs < 1 {
		return fmt.Errorf("-j %d: want at least 1", *jobs)
	}
	ctx := context.Background()
	h, err := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: *cache})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	var g errgroup.Group
	g.SetLimit(*jobs)
	for _, p := range flag.Args() {
		g.Go(func() error {
			start := time.Now()
			tools, _, err := h.Load(ctx, wasm.ModuleConfig{Path: p})
			if err != nil {
				return err
			}
			// Load reads the manifest only (modules compile lazily, on
			// first call); Ready compiles the module into the cache, which
			// is this program's whole job.
			for _, t := range tools[:min(1, len(tools))] {
				if err := wasm.Ready(ctx, t); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
			}
			if !*quiet {
				fmt.Printf("%s ready in %s (cache %s)\n", p, time.Since(start).Round(time.Millisecond), h.CacheDir())
			}
			return nil
		})
	}
	return g.Wait()
}

func defaultDir() string {
	d, err := wasm.DefaultCacheDir()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return d
}
