package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkRunWithUnusedWASM is a whole `kernel run` (config, store,
// scripted model, one answer without tool calls) with no WASM tools, and
// with jq, js and gojq configured but not called. WASM modules load on
// their first call, so the difference is reading three manifests.
func BenchmarkRunWithUnusedWASM(b *testing.B) {
	root, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{"wasm-tools/jq/jq.wasm", "wasm-tools/js/js.wasm", "wasm-tools/gojq/gojq.wasm"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			b.Skipf("%v (run make wasm)", err)
		}
	}
	dir := b.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	write("script.yaml", "steps:\n  - text: \"nothing to do\"\n")
	base := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: .\nstore: {kind: memory}\n"
	configs := map[string]string{
		"none": write("none.yaml", base),
		"jq+js+gojq": write("wasm.yaml", base+"tools:\n  wasm:\n"+
			"    - {path: "+root+"/wasm-tools/jq/jq.wasm}\n"+
			"    - {path: "+root+"/wasm-tools/js/js.wasm, pool: 2}\n"+
			"    - {path: "+root+"/wasm-tools/gojq/gojq.wasm}\n"),
	}
	for _, name := range []string{"none", "jq+js+gojq"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, errOut, err := cliB("run", "--config", configs[name], "hello"); err != nil {
					b.Fatalf("%v\n%s", err, errOut)
				}
			}
		})
	}
}

// cliB runs the CLI in-process, like cli, for benchmarks.
func cliB(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}
