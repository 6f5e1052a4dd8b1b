package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// artifacts returns the repository root after checking that the binaries
// `make` builds exist. `make test` sets AGENTKERNEL_REQUIRE_ARTIFACTS=1, so
// there a missing artifact fails the test; a bare `go test` skips it.
func artifacts(t *testing.T, paths ...string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			if os.Getenv("AGENTKERNEL_REQUIRE_ARTIFACTS") == "1" {
				t.Fatalf("%s is missing: make test builds it first (%v)", p, err)
			}
			t.Skipf("%s is missing: run `make wasm plugins` first, or `make test`", p)
		}
	}
	return root
}

// TestOneHookEveryToolSource: one declarative after-hook redacts a canary
// in the results of a built-in tool, a subprocess plugin's tool and a WASM
// tool alike, before the model or the store sees them.
func TestOneHookEveryToolSource(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	root := artifacts(t, "bin/plugins/git", "bin/plugins/git.sha256", "wasm-tools/jq/jq.wasm")
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o700)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("build id CANARY-1111\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "data.json"), []byte(`{"id":"CANARY-3333"}`), 0o600)
	gitCommit(t, ws, "release CANARY-2222")
	sum, err := os.ReadFile(filepath.Join(root, "bin/plugins/git.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	script := `steps:
  - tool_calls:
      - {name: read_file, args: {path: notes.txt}}
      - {name: git.git_log, args: {max_count: 1}}
      - {name: jq, args: {filter: ".id", file: /data/data.json}}
  - text: done
`
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\n" +
		"hooks:\n  rules:\n    - name: canary\n      phase: after\n      match: 'true'\n      redact: ['CANARY-[0-9]+']\n" +
		"tools:\n  builtin: {enable: [read_file]}\n" +
		"  plugins:\n    - {name: git, path: " + filepath.Join(root, "bin/plugins/git") + ", sha256: " + strings.Fields(string(sum))[0] + ", dir: ws, env: [PATH, HOME], sandbox: {fs: [{path: /usr, mode: ro}, {path: ws, mode: ro}]}}\n" +
		"  wasm:\n    - {path: " + filepath.Join(root, "wasm-tools/jq/jq.wasm") + ", grants: {fs: [{guest: /data, host: ws}], memory_mb: 128}}\n"
	os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o600)
	os.WriteFile(filepath.Join(dir, "kernel.yaml"), []byte(cfg), 0o600)
	store := t.TempDir()
	_, errOut, err := cli(t, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--store", store, "go")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, tool := range []string{"read_file", "git.git_log", "jq"} {
		if !strings.Contains(errOut, "hook canary rewrote "+tool) {
			t.Errorf("the hook did not rewrite %s:\n%s", tool, errOut)
		}
	}
	out, _, err := cli(t, "sessions", "show", "--full", "--store", store, sessionLine.FindStringSubmatch(errOut)[1])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "CANARY-") {
		t.Fatalf("a canary reached the session:\n%s", out)
	}
	if strings.Count(out, "[REDACTED]") < 3 {
		t.Fatalf("want three redactions in the stored results:\n%s", out)
	}
}

// gitCommit makes ws a git repository with one commit of everything in it.
func gitCommit(t *testing.T, ws, message string) {
	t.Helper()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", message)
}

func mustRun(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}
