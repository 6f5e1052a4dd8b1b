//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxAttacksThroughTheCLI plays issue 11's attacks with a scripted
// model through `kernel run`: the git filter attack through the git
// plugin, the kernel's environment through /proc, writes outside the
// workspace and into .git, and survivors of the call through run_command.
// Each assertion fails if the layer that stops it is removed.
func TestSandboxAttacksThroughTheCLI(t *testing.T) {
	root := artifacts(t, "bin/plugins/git", "bin/plugins/git.sha256")
	const key = "sk-cli-kernel-secret-4e7d1c"
	t.Setenv("AGENTKERNEL_TEST_CLI_KEY", key)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	outside := t.TempDir()
	marker := filepath.Join(outside, "filter-ran")
	os.MkdirAll(ws, 0o700)
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("# ws\n"), 0o600)
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "init")
	gitConfig, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
	sum, err := os.ReadFile(filepath.Join(root, "bin/plugins/git.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	evilConfig := string(gitConfig) + "[filter \"x\"]\n\tclean = sh -c 'id > " + marker + "; cat'\n"
	script := `steps:
  - tool_calls:
      - {name: write_file, args: {path: .git/config, content: ` + yamlDQuote(evilConfig) + `}}
      - {name: write_file, args: {path: .gitattributes, content: "* filter=x\n"}}
      - {name: write_file, args: {path: README.md, content: "# changed\n"}}
  - tool_calls:
      - {name: git.git_diff, args: {}}
  - tool_calls:
      - {name: run_command, args: {argv: [sh, -c, "tr '\\0' '\\n' < /proc/$PPID/environ; tr '\\0' '\\n' < /proc/1/environ; echo ppid=$PPID"]}}
      - {name: run_command, args: {argv: [sh, -c, "echo x > ` + outside + `/written; cd / && echo x > ` + outside + `/written2; cd ` + ws + ` && echo x > .git/hooks/pre-commit; echo ok > inside"]}}
      - {name: run_command, args: {argv: [sh, -c, "exec >/dev/null 2>&1; setsid sleep 811.5 & (sleep 811.5 &); echo started"]}}
  - text: done
`
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\n" +
		"tools:\n  builtin: {enable: [write_file, run_command]}\n" +
		"  plugins:\n    - {name: git, path: " + filepath.Join(root, "bin/plugins/git") + ", sha256: " + strings.Fields(string(sum))[0] +
		", dir: ws, env: [PATH], sandbox: {fs: [{path: /usr, mode: ro}, {path: ws, mode: ro}]}}\n"
	out := runScripted(t, dir, script, cfg)
	if !strings.Contains(out, "git.git_diff") || !strings.Contains(out, "ppid=1") || !strings.Contains(out, "started") {
		t.Fatalf("the attacks did not all run:\n%s", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the repository's filter ran through git.git_diff")
	}
	if strings.Contains(out, key) {
		t.Fatalf("a kernel environment value reached the session:\n%s", out)
	}
	for _, f := range []string{filepath.Join(outside, "written"), filepath.Join(outside, "written2"), filepath.Join(ws, ".git", "hooks", "pre-commit")} {
		if _, err := os.Stat(f); err == nil {
			t.Fatalf("run_command wrote %s", f)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "inside")); string(b) != "ok\n" {
		t.Fatalf("the workspace was not writable:\n%s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := 0
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), "sleep\x00811.5") {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes started by run_command survived the call", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runScripted writes script.yaml and kernel.yaml into dir, runs `kernel
// run` on them and returns the whole session (runAndShow).
func runScripted(t *testing.T, dir, script, cfg string) string {
	t.Helper()
	os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o600)
	os.WriteFile(filepath.Join(dir, "kernel.yaml"), []byte(cfg), 0o600)
	return runAndShow(t, filepath.Join(dir, "kernel.yaml"), "go")
}
