// Package wasmtest builds WASM tool modules and fills the compilation cache
// for tests, so that a test run works after a plain `go test` as well as
// after `make wasm`, and never compiles a Go module under the race
// detector (a minute per module on two cores; compiled code is the same).
//
// Typical use in a TestMain:
//
//	jq, err := wasmtest.BuildTool(repoRoot, "wasm-tools/jq", ".", "jq.wasm", false)
//	if err == nil { err = wasmtest.Precompile(repoRoot, jq) }
//	host, _ := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: wasmtest.CacheDir()})
//
// A test builds a shipped tool (wasm-tools/*) with BuildTool, into Dir,
// never in place: the module beside its sources is make's, the one the
// kernel and the demo run and `make` precompiles, and a rebuild there
// would make the next `make demo` precompile again.
package wasmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
)

// CacheDir is the compilation cache tests share: the kernel's default,
// wasm.DefaultCacheDir (which `make wasm` fills; this package cannot import
// plugins/wasm, whose own tests use it), or a directory under os.TempDir
// when there is no home directory.
func CacheDir() string {
	if x := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "agentkernel", "wasm")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "agentkernel", "wasm")
	}
	return filepath.Join(os.TempDir(), "agentkernel-wasm-test-cache")
}

// Dir is the directory tests build modules into: bin/test-wasm under
// repoRoot (bin/ is the build's, and ignored by git).
func Dir(repoRoot string) string {
	return filepath.Join(repoRoot, "bin", "test-wasm")
}

// BuildTool builds the tool whose sources are in srcDir (relative to
// repoRoot, e.g. "wasm-tools/jq"; pkg is the package to build, run from
// srcDir: "." or a module path) into Dir(repoRoot)/srcDir/name, with its
// tool.json copied beside it, and returns the module's absolute path.
// Nothing under srcDir is written.
func BuildTool(repoRoot, srcDir, pkg, name string, cshared bool) (string, error) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return "", err
	}
	outDir := filepath.Join(Dir(root), filepath.FromSlash(srcDir))
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	manifest, err := os.ReadFile(filepath.Join(root, srcDir, "tool.json"))
	if err != nil {
		return "", fmt.Errorf("the tool's manifest: %w", err)
	}
	dst := filepath.Join(outDir, "tool.json")
	if old, err := os.ReadFile(dst); err != nil || !bytes.Equal(old, manifest) {
		if err := os.WriteFile(dst, manifest, 0o644); err != nil {
			return "", err
		}
	}
	out := filepath.Join(outDir, name)
	return out, Build(filepath.Join(root, srcDir), out, pkg, cshared)
}

// Build compiles the Go package pkg to WASI preview1 as out, running go
// build in dir. cshared builds a reactor (-buildmode=c-shared) instead of
// a command. go build does nothing when out is up to date.
func Build(dir, out, pkg string, cshared bool) error {
	args := []string{"build", "-trimpath"}
	if cshared {
		args = append(args, "-buildmode=c-shared")
	}
	args = append(args, "-o", out, pkg)
	return goCmd(dir, append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm"), args...)
}

// Precompile compiles modules (paths relative to repoRoot or absolute,
// each with its tool.json) into CacheDir with plugins/wasm/internal/precompile, built
// without the race detector. wazero names its cache after the version it
// finds in the binary's build information, which test binaries lack ("dev"),
// unless the link set it (`make test` does: the test binaries then share
// the entries `make wasm` compiled for the kernel), so the helper is told
// the version the calling test binary's wazero reports. It is built
// -trimpath, as make builds bin/tools/precompile, so a cold `make test`
// compiles its packages once for both (RATIONALE.md, "One build
// configuration per binary kind (issue 45)").
func Precompile(repoRoot string, modules ...string) error {
	args := []string{"run", "-trimpath", "-ldflags=-X=github.com/tetratelabs/wazero/internal/version.version=" + SeenWazeroVersion(),
		"./plugins/wasm/internal/precompile", "-q", "-cache", CacheDir()}
	return goCmd(repoRoot, os.Environ(), append(args, modules...)...)
}

var seen struct {
	once    sync.Once
	version string
}

// SeenWazeroVersion is the version wazero reports in the running binary:
// the dependency's version from the build information, the one the link
// set (-X github.com/tetratelabs/wazero/internal/version.version=...), or
// "dev". It asks wazero itself: a compilation cache in a temporary
// directory is named after that version (wazero-<version>-<arch>-<os>).
func SeenWazeroVersion() string {
	seen.once.Do(func() { seen.version = askWazero() })
	return seen.version
}

func askWazero() string {
	dir, err := os.MkdirTemp("", "wasmtest-wazero-version-")
	if err != nil {
		panic(fmt.Sprintf("wasmtest: the wazero version: %v", err))
	}
	defer os.RemoveAll(dir)
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		panic(fmt.Sprintf("wasmtest: the wazero version: %v", err))
	}
	c.Close(context.Background())
	entries, err := os.ReadDir(dir)
	suffix := "-" + runtime.GOARCH + "-" + runtime.GOOS
	if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "wazero-") || !strings.HasSuffix(entries[0].Name(), suffix) {
		panic(fmt.Sprintf("wasmtest: the wazero version: want one wazero-<version>%s in %s, got %v (%v)", suffix, dir, entries, err))
	}
	return strings.TrimSuffix(strings.TrimPrefix(entries[0].Name(), "wazero-"), suffix)
}

func goCmd(dir string, env []string, args ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out.String())
	}
	return nil
}

// Snapshot writes out, the pre-initialised image of the reactor module in
// (plugins/wasm/internal/snapshot, built without the race detector, as
// `make wasm` does for the shipped js tool), unless out is already the
// snapshot of in. out's base name is the name the guest sees as its
// argument.
func Snapshot(repoRoot, in, out string) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(out); err == nil {
		sum := sha256.Sum256(src)
		// The snapshot section's JSON names its source (plugins/wasm
		// reads it properly when it loads the module).
		if bytes.Contains(old, []byte(`"source":"`+hex.EncodeToString(sum[:])+`"`)) {
			return nil
		}
	}
	// -trimpath: make's flags for bin/tools/snapshot (see Precompile).
	return goCmd(repoRoot, os.Environ(), "run", "-trimpath", "./plugins/wasm/internal/snapshot", "-o", out, in)
}
