package wasmtest_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/plugins/wasm"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

func TestCacheDirIsTheKernelDefault(t *testing.T) {
	for _, xdg := range []string{"", "/var/cache/x"} {
		t.Setenv("XDG_CACHE_HOME", xdg)
		want, err := wasm.DefaultCacheDir()
		if err != nil {
			t.Skip(err)
		}
		if got := wasmtest.CacheDir(); got != want {
			t.Errorf("XDG_CACHE_HOME=%q: CacheDir %q, DefaultCacheDir %q", xdg, got, want)
		}
	}
}

// TestBuildToolLeavesTheSourcesAlone: a tool built for a test lands in
// Dir, with its manifest, and nothing is written beside its sources,
// where make builds the module the kernel and the demo run.
func TestBuildToolLeavesTheSourcesAlone(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "tools", "hello")
	files := map[string]string{
		"go.mod":    "module example.com/hello\n\ngo 1.24\n",
		"main.go":   "package main\n\nfunc main() {}\n",
		"tool.json": `{"name":"hello"}`,
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := wasmtest.BuildTool(root, "tools/hello", ".", "hello.wasm", false)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wasmtest.Dir(root), "tools", "hello", "hello.wasm"); out != want {
		t.Errorf("built %s, want %s", out, want)
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Errorf("%s is not a WASM module: %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(out), "tool.json")); err != nil || string(b) != files["tool.json"] {
		t.Errorf("the manifest beside the module: %q, %v", b, err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			t.Errorf("BuildTool wrote %s beside the sources", e.Name())
		}
	}
}

// TestSeenWazeroVersionFollowsTheLink: the version Precompile compiles for
// is the one the binary's wazero reports, whether it comes from the build
// information (a program built from this module: go.mod's wazero) or from
// the link (-X, what `make test` gives the test binaries so that they read
// the entries `make wasm` compiled for the kernel). A wrong answer would
// make every test binary compile its modules again, under the race detector.
func TestSeenWazeroVersionFollowsTheLink(t *testing.T) {
	gomod, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/tetratelabs/wazero").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	for _, c := range []struct {
		name, ldflags, want string
	}{
		{"build information", "", strings.TrimSpace(string(gomod))},
		{"set by the link", "-X=github.com/tetratelabs/wazero/internal/version.version=v9.9.9-link", "v9.9.9-link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "version")
			// -trimpath, as make and Precompile build the precompiler:
			// one compile of wazero for all three (RATIONALE.md, "One
			// build configuration per binary kind (issue 45)").
			args := []string{"build", "-trimpath", "-o", bin}
			if c.ldflags != "" {
				args = append(args, "-ldflags="+c.ldflags)
			}
			if out, err := exec.Command("go", append(args, "./testdata/version")...).CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			out, err := exec.Command(bin).Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(out)); got != c.want {
				t.Errorf("SeenWazeroVersion %q, want %q", got, c.want)
			}
		})
	}
}
