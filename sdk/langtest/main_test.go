// Package langtest tests the plugin SDKs of every language together,
// through the kernel's real host: the conformance suite against the Go,
// TypeScript and Python conformance plugins and the example plugins, bad
// plugins, tampering, the sandbox, the scripted run of the examples, the
// tutorials of docs/plugins.md, and the benchmarks that compare them.
//
// `make test` builds what these tests need first (the TypeScript SDK and
// its bundles, the http_get example, Debian's Python packages); run alone,
// a test whose artifact is missing skips, unless AGENTKERNEL_REQUIRE_ARTIFACTS=1
// (which make test sets) makes it fail.
package langtest

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

// root is the repository's root.
var root string

// goPlugin is the Go conformance plugin, built by TestMain.
var goPlugin struct{ path, sum string }

// python is Debian's Python, which has grpcio, protobuf and cryptography
// (a python3 earlier in PATH, such as pyenv's, may not).
const python = "/usr/bin/python3"

func TestMain(m *testing.M) {
	sandbox.Main()
	// The tests mostly wait on the interpreters and plugins they start
	// (a package's CPU is a third of its time): the parallel ones run
	// four at a time, unless -test.parallel is given, as in cmd/kernel.
	// RATIONALE.md, "The plugin SDKs' tests and builds (issue 45)".
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	r, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root = r
	dir, err := os.MkdirTemp("", "sdk-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	goPlugin.path = filepath.Join(dir, "conformance")
	if err := sdktest.BuildTo(goPlugin.path, filepath.Join(root, "sdk/sdktest/testdata/conformance")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if goPlugin.sum, err = sdktest.FileSHA256(goPlugin.path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Every sandbox (each plugin start) runs a launcher built from
	// cmd/sandbox-init, the dedicated launcher the kernel uses, not this
	// race-built test binary re-executed (~0.45 s of CPU per start).
	// RATIONALE.md, "cmd/kernel and sdk/langtest start the dedicated
	// launcher (issue 45)".
	if runtime.GOOS == "linux" {
		launcher := filepath.Join(dir, sandbox.LauncherName)
		if err := sdktest.BuildTo(launcher, filepath.Join(root, "cmd/sandbox-init"), "-tags="+sandbox.LauncherBuildTag); err != nil {
			fmt.Fprintln(os.Stderr, "the sandbox launcher:", err)
			return 1
		}
		if err := sandbox.UseLauncher(launcher, ""); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// need fails the test (under make test) or skips it when something make
// builds or installs is missing.
func need(t testing.TB, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("AGENTKERNEL_REQUIRE_ARTIFACTS") == "1" {
		t.Fatalf("%s is missing: make test provides it first", what)
	}
	t.Skipf("%s is missing: run `make sdk` first, or `make test`", what)
}

// artifact returns the absolute path of a file make builds.
func artifact(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	_, err := os.Stat(p)
	need(t, rel, err == nil)
	return p
}

// node returns node's real path.
func node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	need(t, "node", err == nil)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// needPython checks Debian's Python and its packages.
func needPython(t testing.TB) {
	t.Helper()
	err := exec.Command(python, "-c", "import grpc, google.protobuf, cryptography").Run()
	need(t, python+" with grpcio, protobuf and cryptography (Debian's python3-grpcio python3-protobuf python3-cryptography)", err == nil)
}

// pluginDir makes a plugin directory: files (name to content) and links
// (name to target), locked. It returns the directory and the lock's sha256.
func pluginDir(t testing.TB, files map[string]string, links map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	sum, _, err := subprocess.WriteLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, sum
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pythonPlugin is a Python plugin: script as plugin.py, with the SDK linked
// in, locked and pinned.
func pythonPlugin(t testing.TB, name, script string) subprocess.PluginConfig {
	t.Helper()
	needPython(t)
	dir, sum := pluginDir(t, map[string]string{"plugin.py": script},
		map[string]string{"agentkernel_plugin": filepath.Join(root, "sdk/python/agentkernel_plugin")})
	return subprocess.PluginConfig{Name: name, Path: filepath.Join(dir, "plugin.py"), SHA256: sum,
		Interpreter: &subprocess.Interpreter{Path: python}}
}

// nodePlugin is a TypeScript plugin: files (JavaScript, the bundled
// conformance plugin among them if asked) with entry the script, locked.
func nodePlugin(t testing.TB, name, entry string, files map[string]string) subprocess.PluginConfig {
	t.Helper()
	dir, sum := pluginDir(t, files, nil)
	return subprocess.PluginConfig{Name: name, Path: filepath.Join(dir, entry), SHA256: sum,
		Interpreter: &subprocess.Interpreter{Path: node(t)}}
}

// The conformance plugins, one per language, configured as kernel.yaml
// would.
func conformancePlugin(t testing.TB, lang string) subprocess.PluginConfig {
	t.Helper()
	switch lang {
	case "go":
		return subprocess.PluginConfig{Name: "conf-go", Path: goPlugin.path, SHA256: goPlugin.sum}
	case "typescript":
		bundle := readFile(t, artifact(t, "bin/sdk/conformance-typescript/plugin.js"))
		return nodePlugin(t, "conf-ts", "plugin.js", map[string]string{"plugin.js": bundle})
	case "python":
		return pythonPlugin(t, "conf-py", readFile(t, filepath.Join(root, "sdk/python/tests/conformance/plugin.py")))
	}
	t.Fatalf("no conformance plugin for %s", lang)
	return subprocess.PluginConfig{}
}

var languages = []string{"go", "typescript", "python"}

// logWriter sends the host's log to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = logWriter{}
