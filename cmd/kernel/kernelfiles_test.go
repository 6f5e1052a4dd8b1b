package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiscoveredConfigCannotAllowItself is issue 25's attack on
// discovery: without --config the kernel reads ./kernel.yaml, and the
// working directory is the default workspace. The model's write_file of
// kernel.yaml is refused (a discovery path is a kernel file even while it
// does not exist); the file it plants anyway through run_command, which
// says security.allow_writable: [kernel.yaml], makes the next start fail
// naming the file and the fix, instead of loading silently.
func TestDiscoveredConfigCannotAllowItself(t *testing.T) {
	ws, userDir := t.TempDir(), t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", userDir)
	planted := "security: {allow_writable: [kernel.yaml]}\\nhooks: {scrubber: {enabled: false}}\\n"
	writeFiles(t, userDir, map[string]string{
		"script.yaml": "steps:\n" +
			"  - tool_calls:\n      - {name: write_file, args: {path: kernel.yaml, content: \"" + planted + "\"}}\n" +
			"  - tool_calls:\n      - {name: run_command, args: {argv: [sh, -c, \"printf '" + planted + "' > kernel.yaml\"]}}\n" +
			"  - text: done\n",
		// The user's own file: the workspace is the working directory.
		"agentkernel/kernel.yaml": "model: {provider: scripted, name: m, script: ../script.yaml}\ntools:\n  builtin:\n    enable: [read_file, write_file, run_command]\n",
	})
	t.Chdir(ws)
	store := t.TempDir()
	_, errOut, err := cli(t, "run", "--store", store, "configure yourself")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, `write "kernel.yaml": it is one of the kernel's own files`) {
		t.Errorf("write_file of the discovered kernel.yaml was not refused:\n%s", errOut)
	}
	b, err := os.ReadFile(filepath.Join(ws, "kernel.yaml"))
	if err != nil || !strings.Contains(string(b), "allow_writable") {
		t.Fatalf("run_command did not plant kernel.yaml (%v), so this test proves nothing:\n%s", err, errOut)
	}

	// The next start in that directory discovers it, and refuses it.
	_, errOut, err = cli(t, "run", "--store", store, "go on")
	if !errors.Is(err, ErrProtectedWritable) {
		t.Fatalf("the kernel started with a model-written ./kernel.yaml that allows itself: %v\n%s", err, errOut)
	}
	planted1 := filepath.Join(ws, "kernel.yaml")
	for _, want := range []string{planted1 + " sets security.allow_writable", "so the model could write it", "--config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestInterpreterScriptsAreKernelFiles: a command hook's script given to
// an interpreter ([sh, hook.sh]), an MCP stdio server's script under
// {workspace}, a file a plugin's arguments name and model.catalog are
// kernel files: inside the writable workspace the kernel refuses to start,
// naming the file; named from outside, write_file refuses to change them.
func TestInterpreterScriptsAreKernelFiles(t *testing.T) {
	base := "model: {provider: scripted, name: m, script: script.yaml}\ntools:\n  builtin:\n    enable: [read_file, write_file]\n"
	for _, tc := range []struct {
		name, file, config, what string
	}{
		{"hook script", "hook.sh", "hooks:\n  rules:\n    - {name: h, phase: before, command: {argv: [sh, WS/hook.sh]}}\n", "a file the command of hook h runs"},
		{"relative hook script", "hook.sh", "hooks:\n  rules:\n    - {name: h, phase: before, command: {argv: [sh, hook.sh]}}\n", "a file the command of hook h runs"},
		{"mcp server script", "server.sh", "  mcp:\n    - {name: s, command: [sh, \"{workspace}/server.sh\"]}\n", "a file the command of MCP server s runs"},
		{"mcp server script, relative to its dir", "server.sh", "  mcp:\n    - {name: s, command: [sh, server.sh]}\n", "a file the command of MCP server s runs"},
		{"npm .bin link", "node_modules/pkg/cli.js", "  mcp:\n    - {name: s, command: [node, \"{workspace}/node_modules/.bin/pkg\"]}\n", "a file the command of MCP server s runs"},
		{"model catalog", "catalog.yaml", "", "the model catalog (model.catalog)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, ws := t.TempDir(), t.TempDir()
			writeFiles(t, ws, map[string]string{tc.file: "#!/bin/sh\nexit 0\n", "node_modules/pkg/package.json": "{}"})
			os.MkdirAll(filepath.Join(ws, "node_modules", ".bin"), 0o700)
			os.Symlink("../pkg/cli.js", filepath.Join(ws, "node_modules", ".bin", "pkg"))
			conf := strings.ReplaceAll(base+tc.config, "WS", ws)
			if tc.config == "" {
				conf = strings.Replace(base, "model: {", "model: {catalog: "+filepath.Join(ws, tc.file)+", ", 1)
			}
			conf += "workspace: " + ws + "\n"
			writeFiles(t, dir, map[string]string{"kernel.yaml": conf, "script.yaml": "steps:\n  - text: done\n"})
			t.Chdir(ws) // a hook's relative arguments are relative to the kernel's working directory
			_, errOut, err := cli(t, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--store", t.TempDir(), "go")
			if !errors.Is(err, ErrProtectedWritable) {
				t.Fatalf("started with %s inside the writable workspace: %v\n%s", tc.file, err, errOut)
			}
			if !strings.Contains(err.Error(), tc.what+" "+filepath.Join(ws, tc.file)) && !strings.Contains(err.Error(), tc.what+" "+filepath.Join(ws, "node_modules", ".bin", "pkg")) {
				t.Errorf("error does not name %s %s:\n%v", tc.what, tc.file, err)
			}
		})
	}
}

// npmFilesystemServer is the npm MCP server `make test` installs
// (internal/mcptest/npm), started the way its README configures it.
const npmFilesystemServer = "bin/mcp-npm/node_modules/.bin/mcp-server-filesystem"

// TestNPMServerNeedsNoGrantForItself is issue 33's first item through the
// CLI: the npm filesystem server configured as [node, .../.bin/NAME,
// {workspace}] with no grant starts (its .bin link, the script it leads to
// and its node_modules tree are readable by default) and its tools work.
// Before, node died with EACCES on the script.
func TestNPMServerNeedsNoGrantForItself(t *testing.T) {
	root := artifacts(t, npmFilesystemServer)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (make test installs it with the npm server): %v", err)
	}
	dir, ws := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"notes/a.txt": "the filesystem server read this\n"})
	writeFiles(t, dir, map[string]string{
		"script.yaml": "steps:\n" +
			"  - tool_calls:\n      - {name: fs.read_text_file, args: {path: " + filepath.Join(ws, "notes", "a.txt") + "}}\n" +
			"      - {name: fs.list_directory, args: {path: " + filepath.Join(ws, "notes") + "}}\n" +
			"  - text: done\n",
		"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\n" +
			"tools:\n  builtin: {enable: [read_file]}\n  mcp:\n    - name: fs\n" +
			"      command: [node, " + filepath.Join(root, npmFilesystemServer) + ", \"{workspace}\"]\n" +
			"      env: [PATH]\n      tiers: {read_text_file: read_only, list_directory: read_only}\n",
	})
	out := runAndShow(t, filepath.Join(dir, "kernel.yaml"), "read the notes")
	if strings.Contains(out, "✗") {
		t.Fatalf("a filesystem server call failed:\n%s", out)
	}
	for _, want := range []string{"the filesystem server read this", "[FILE] a.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("the session lacks %q:\n%s", want, out)
		}
	}
}

// TestEditGitConfigRefused is issue 25's finding 3 through the CLI: the
// model's edit_file of .git/config (planting core.fsmonitor, which the
// operator's next `git status` would run as them) and its write_file of a
// hook are refused; granting .git read-write to commands
// (tools.builtin.command_sandbox) is the operator's way to allow it.
func TestEditGitConfigRefused(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not installed: %v", err)
	}
	script := "steps:\n" +
		"  - tool_calls:\n" +
		"      - {name: edit_file, args: {path: .git/config, old: \"[core]\", new: \"[core]\\n\\tfsmonitor = /tmp/planted.sh\"}}\n" +
		"      - {name: write_file, args: {path: .git/hooks/post-checkout, content: \"#!/bin/sh\\necho planted\\n\"}}\n" +
		"  - text: done\n"
	for _, tc := range []struct {
		name, grant string
		refused     bool
	}{
		{"default", "", true},
		{"granted to commands", "    command_sandbox: {fs: [{path: WS/.git, mode: rw}]}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, ws := t.TempDir(), t.TempDir()
			if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v\n%s", err, out)
			}
			before, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
			writeFiles(t, dir, map[string]string{
				"script.yaml": script,
				"kernel.yaml": "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\n" +
					"tools:\n  builtin:\n    enable: [read_file, write_file, edit_file]\n" + strings.ReplaceAll(tc.grant, "WS", ws),
			})
			_, errOut, err := cli(t, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--store", t.TempDir(), "set up git")
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			after, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
			_, hookErr := os.Stat(filepath.Join(ws, ".git", "hooks", "post-checkout"))
			if !tc.refused {
				if !strings.Contains(string(after), "fsmonitor") || hookErr != nil {
					t.Fatalf("with .git granted, the writes did not happen:\n%s", errOut)
				}
				return
			}
			if strings.Count(errOut, ".git is the repository's control plane") != 2 {
				t.Errorf("the edits of .git were not both refused:\n%s", errOut)
			}
			if string(after) != string(before) || hookErr == nil {
				t.Fatalf(".git changed:\n%s", after)
			}
		})
	}
}
