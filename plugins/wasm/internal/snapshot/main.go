// Command snapshot writes a reactor module's pre-initialised image: it runs
// the module's _initialize and agentkernel_warm once and writes a module
// that starts where they left off (wasm.Snapshot), so that the kernel's
// fresh instances skip both. `make wasm` builds the js tool through it.
//
//	go run ./plugins/wasm/internal/snapshot -o out.wasm module.wasm
//
// The guest sees the arguments [name] (the file's base name without .wasm,
// as the kernel passes a module's name), no environment, no files, a fake
// clock and a deterministic random stream while it initialises.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/plugins/wasm"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "snapshot:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("o", "", "the snapshot module to write")
	flag.Parse()
	if flag.NArg() != 1 || *out == "" {
		return fmt.Errorf("usage: snapshot -o out.wasm module.wasm")
	}
	in := flag.Arg(0)
	bin, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	name := strings.TrimSuffix(filepath.Base(*out), ".wasm")
	snap, err := wasm.Snapshot(context.Background(), bin, []string{name})
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	// A new file of a random name beside out (O_EXCL: never a link planted
	// at a known path), then renamed over it: out is the whole snapshot
	// or the old file. 0644 like every module the build writes: a module
	// is read by the kernel, not a secret.
	f, err := os.CreateTemp(filepath.Dir(*out), filepath.Base(*out)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, nothing is there
	if _, err := f.Write(snap); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), *out)
}
