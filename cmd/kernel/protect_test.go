package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSelfRewriteRefusedAtStart: with kernel.yaml and the policy inside a
// workspace the write tools can change (the README's old setup), the kernel
// refuses to start, naming each file and the fix. Opting the files in lets
// it start, and write_file still cannot change the policy.
func TestSelfRewriteRefusedAtStart(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{
		"policy.yaml": "name: p\nrevision: \"1\"\ndefaults:\n  tool_call: allow\n",
		"script.yaml": "steps:\n  - tool_calls:\n      - name: write_file\n        args: {path: policy.yaml, content: \"name: p\\nrevision: x\\ndefaults:\\n  tool_call: allow\\nrules: []\\n\"}\n  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: .\npolicy: {file: policy.yaml}\ntools:\n  builtin:\n    enable: [read_file, write_file]\n",
	})
	cfg := filepath.Join(ws, "kernel.yaml")
	_, errOut, err := cli(t, "run", "--config", cfg, "--store", t.TempDir(), "go")
	if err == nil {
		t.Fatalf("started with its policy inside the writable workspace\n%s", errOut)
	}
	if !errors.Is(err, ErrProtectedWritable) {
		t.Fatalf("error %v", err)
	}
	for _, want := range []string{"the policy " + filepath.Join(ws, "policy.yaml"), "a configuration layer " + cfg, "write_file", "security.allow_writable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	// Opted in by a file outside the workspace: the kernel starts, and the
	// write tool still refuses.
	before, _ := os.ReadFile(filepath.Join(ws, "policy.yaml"))
	outside := writeFiles(t, t.TempDir(), map[string]string{
		"optin.yaml": "security: {allow_writable: [" + cfg + ", " + filepath.Join(ws, "policy.yaml") + "]}\n",
	})
	_, errOut, err = cli(t, "run", "--config", filepath.Join(outside, "optin.yaml"), "--config", cfg, "--store", t.TempDir(), "go")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "kernel's own files") {
		t.Fatalf("write_file of the policy was not refused:\n%s", errOut)
	}
	if after, _ := os.ReadFile(filepath.Join(ws, "policy.yaml")); string(after) != string(before) {
		t.Fatalf("the policy changed:\n%s", after)
	}
}

// TestSelfRewriteRefusedAtReload: a configuration rewritten while the
// kernel runs so that a hook script lies inside the writable workspace is
// not loaded; the running hooks stay.
func TestSelfRewriteRefusedAtReload(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"hook.sh": "#!/bin/sh\nexit 0\n"})
	os.Chmod(filepath.Join(ws, "hook.sh"), 0o700)
	cfgPath := filepath.Join(dir, "kernel.yaml")
	base := "workspace: " + ws + "\ntools:\n  builtin:\n    enable: [read_file, write_file]\n"
	write := func(body string) {
		tmp := cfgPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	write(base + "hooks:\n  rules:\n    - name: first\n      phase: before\n      block_when: 'false'\n")
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.checkProtected(); err != nil {
		t.Fatal(err)
	}
	a, err := newApp(t.Context(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	wait := watchReloads(t, a)
	write(base + "hooks:\n  rules:\n    - name: second\n      phase: before\n      command: {argv: [" + filepath.Join(ws, "hook.sh") + "]}\n")
	if r := wait(); !strings.Contains(r.Error, "a file the command of hook second runs") || !strings.Contains(r.Error, "allow_writable") {
		t.Fatalf("reload event %+v", r)
	}
	if n := a.chain.Config().Rules[0].Name; n != "first" {
		t.Fatalf("the hooks were reloaded: rule %s", n)
	}
}

// TestSandboxGrantsCannotExposeKernelFiles: a read-write sandbox grant of a
// native tool source (run_command's command_sandbox, an MCP stdio server's
// grant) that covers the policy makes the kernel refuse to start, naming the
// grant. Without sandboxWritable in writableSources this starts.
func TestSandboxGrantsCannotExposeKernelFiles(t *testing.T) {
	for name, grant := range map[string]string{
		"command_sandbox": "tools:\n  builtin:\n    enable: [read_file]\n    command_sandbox: {fs: [{path: conf, mode: rw}]}\n",
		"mcp":             "tools:\n  builtin:\n    enable: [read_file]\n  mcp:\n    - name: s\n      command: [/bin/true]\n      grant: {fs: [{path: conf, mode: rw}]}\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir, ws := t.TempDir(), t.TempDir()
			writeFiles(t, dir, map[string]string{
				"conf/policy.yaml": "name: p\nrevision: \"1\"\ndefaults:\n  tool_call: allow\n",
				"script.yaml":      "steps:\n  - text: done\n",
				"kernel.yaml":      "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\npolicy: {file: conf/policy.yaml}\n" + grant,
			})
			_, errOut, err := cli(t, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--store", t.TempDir(), "go")
			if !errors.Is(err, ErrProtectedWritable) {
				t.Fatalf("started with the policy inside a sandbox rw grant: %v\n%s", err, errOut)
			}
			if !strings.Contains(err.Error(), "sandbox grant") {
				t.Errorf("error does not name the grant: %v", err)
			}
		})
	}
}

// TestMCPServeRefusesWritableKernelFiles: `kernel mcp serve` runs tools
// like `run`, so it refuses a configuration whose policy a tool could
// rewrite (it skipped the check before loadApp).
func TestMCPServeRefusesWritableKernelFiles(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{
		"policy.yaml": "name: p\nrevision: \"1\"\ndefaults:\n  tool_call: allow\n",
		"kernel.yaml": "workspace: .\npolicy: {file: policy.yaml}\ntools:\n  builtin:\n    enable: [read_file, write_file]\n",
	})
	_, errOut, err := cli(t, "mcp", "serve", "--config", filepath.Join(ws, "kernel.yaml"), "--store", t.TempDir())
	if !errors.Is(err, ErrProtectedWritable) {
		t.Fatalf("mcp serve started with its policy inside the writable workspace: %v\n%s", err, errOut)
	}
}
