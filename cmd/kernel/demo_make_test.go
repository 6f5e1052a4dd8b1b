package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

// demoArtifacts are what `make demo` builds (make demo-deps): the kernel,
// its sandbox launcher, the git plugin and its pin, and the WASM tools the
// demo's kernel.yaml loads.
var demoArtifacts = []string{
	"bin/kernel", "bin/agentkernel-sandbox-init", "bin/plugins/git", "bin/plugins/git.sha256",
	"wasm-tools/jq/jq.wasm", "wasm-tools/js/js.wasm",
}

// madeSomething matches a line the Makefile prints when it builds,
// precompiles, pins or installs something (say, scripts/gobuild.sh).
var madeSomething = regexp.MustCompile(`(?m)^  (build|precompile|snapshot|pin|wasm|npm|plugin|lock|apt|generate) +\S`)

// TestMakeDemo runs `make demo` twice, as a newcomer does, with the WASM
// tools' tests building their modules in between, and checks:
//
//   - the second run builds, precompiles and pins nothing (the Makefile
//     prints a line for each thing it makes) and leaves every artifact of
//     the demo with the modification time it had: a test run does not
//     rebuild the demo's modules in place (wasmtest.BuildTool builds into
//     bin/test-wasm), so the precompile stamps stay valid;
//   - the demo tells its story: tools from three sources, a redacted
//     secret, a denial, an approval request and its approval, a new
//     session whose request memory gave what the first one read, and no
//     secret reaches the session store.
//
// The time a warm `make demo` takes is measured outside the tests
// (RATIONALE.md, "The demo builds what it runs").
func TestMakeDemo(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is not installed: %v", err)
	}
	first := makeDemo(t, root)
	before := mtimes(t, root)

	// What the WASM tools' tests do first (their TestMain): build the
	// demo's modules from the same sources, into their own directory.
	for _, m := range []struct {
		dir, name string
		cshared   bool
	}{{"wasm-tools/jq", "jq.wasm", false}, {"wasm-tools/js", "js-raw.wasm", true}} {
		p, err := wasmtest.BuildTool(root, m.dir, ".", m.name, m.cshared)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p, wasmtest.Dir(root)+string(filepath.Separator)) {
			t.Fatalf("the test build of %s is %s, not under %s", m.name, p, wasmtest.Dir(root))
		}
	}

	second := makeDemo(t, root)
	if made := madeSomething.FindAllString(second, -1); len(made) > 0 {
		t.Errorf("the second make demo built something again:\n%s\n--- first run:\n%s", strings.Join(made, "\n"), first)
	}
	for p, mt := range mtimes(t, root) {
		if !mt.Equal(before[p]) {
			t.Errorf("%s changed between two make demo runs (mtime %s, then %s)", p, before[p].Format(time.RFC3339Nano), mt.Format(time.RFC3339Nano))
		}
	}

	for _, want := range []string{
		"✓ git.git_log", "✓ jq", "hook scrubber rewrote read_file", "hook hide-internal-hosts rewrote read_file",
		"reached me as `[REDACTED]`", "policy: deny run_command: destructive command refused: rm -rf build",
		"approval required: edit_file", "awaiting_approval", "approval approved edit_file", "Fixed: `docs/guide.md`",
		"docs/guide.md | 2 +-",
		"4. Memory", "tool read_file", "hook memory", "uploads the report to `s3://link-reports`",
	} {
		if !strings.Contains(second, want) {
			t.Errorf("the demo output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", second)
	}
	kernelBin, store := filepath.Join(root, "bin/kernel"), filepath.Join(root, "bin/demo/store")
	rows := strings.Split(strings.TrimSpace(string(mustRun(t, kernelBin, "sessions", "ls", "--store", store))), "\n")
	if len(rows) != 3 {
		t.Fatalf("the demo stored %d sessions, want 2:\n%s", len(rows)-1, strings.Join(rows, "\n"))
	}
	// Newest first: step 4's session, then the one of steps 1-3.
	recall, first := strings.Fields(rows[1])[0], strings.Fields(rows[2])[0]
	for _, id := range []string{first, recall} {
		data, _ := exec.Command(kernelBin, "sessions", "export", "--store", store, id).Output()
		for _, secret := range []string{"Tr0ub4dor", "AKIA6PYCDYBK155OXTZ7", "reports-db01"} {
			if len(data) == 0 || strings.Contains(string(data), secret) {
				t.Fatalf("secret %q in the stored session %s (or no export): %d bytes", secret, id, len(data))
			}
		}
	}
	// Step 4 retrieved: the new session's request held memory's message,
	// with what the first session read (the upload target) and where it
	// came from.
	out, err := exec.Command(kernelBin, "sessions", "export", "--store", store, recall).Output()
	if err != nil {
		t.Fatal(err)
	}
	var injected string
	for _, line := range strings.Split(string(out), "\n") {
		var m kernel.Message
		if json.Unmarshal([]byte(line), &m) == nil && m.Role == kernel.RoleSystem && strings.HasPrefix(m.Content, memory.Header) {
			injected = m.Content
		}
	}
	if !strings.Contains(injected, "s3://link-reports") || !strings.Contains(injected, "[session "+first+" message ") {
		t.Fatalf("step 4's request holds no memory of session %s's upload target: %q\n%s", first, injected, out)
	}
}

// makeDemo runs `make demo` in root as a user would (not as a sub-make of
// `make test`) and returns its output.
func makeDemo(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "demo")
	cmd.Dir = root
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "V":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	return string(out)
}

// mtimes returns the modification time of each of the demo's artifacts.
func mtimes(t *testing.T, root string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	for _, p := range demoArtifacts {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatalf("make demo did not build %s: %v", p, err)
		}
		out[p] = fi.ModTime()
	}
	return out
}
