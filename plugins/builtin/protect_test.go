package builtin

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
)

// protectEnv is a workspace with a git repository (.git/config,
// .git/modules/sub/config), a policy file the kernel protects, and the
// write tools built with cfg (Root and Protected set here).
func protectEnv(t *testing.T, cfg Config) (ws string, tools map[string]kernel.Tool) {
	t.Helper()
	ws = t.TempDir()
	mkfiles(t, ws, map[string]string{
		".git/config":             "[core]\n\tbare = false\n",
		".git/modules/sub/config": "[core]\n",
		"conf/policy.yaml":        "[core] # name: p\n",
		"src/main.go":             "package main\n",
	})
	cfg.Root = ws
	cfg.Protected = append(cfg.Protected, filepath.Join(ws, "conf", "policy.yaml"), filepath.Join(ws, "kernel.yaml"))
	ts, closer, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	tools = map[string]kernel.Tool{}
	for _, tl := range ts {
		tools[tl.Spec().Name] = tl
	}
	return ws, tools
}

// TestWriteToolsRefuseGitAndKernelFiles is issue 25's finding 3 at the
// layer that holds it: write_file and edit_file refuse .git (config,
// hooks, modules/), whatever path leads there — a case or normalisation
// variant a case-insensitive or normalising file system would take for
// .git, a symbolic link inside the workspace, a hard link — and the
// kernel's own files the same way, including one that does not exist yet
// (a discovery path). Ordinary files are written as before.
func TestWriteToolsRefuseGitAndKernelFiles(t *testing.T) {
	ws, tools := protectEnv(t, Config{})
	symlink(t, ws, ".git", "repo")
	symlink(t, ws, "conf", "c")
	if err := os.Link(filepath.Join(ws, ".git", "config"), filepath.Join(ws, "gitconfig-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(ws, "conf", "policy.yaml"), filepath.Join(ws, "policy-link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tool, path, want string
	}{
		{"edit .git/config", NameEditFile, ".git/config", "control plane"},
		{"write .git/config", NameWriteFile, ".git/config", "control plane"},
		{"a new hook", NameWriteFile, ".git/hooks/pre-commit", "control plane"},
		{"a submodule's config", NameEditFile, ".git/modules/sub/config", "control plane"},
		{"through a link", NameEditFile, "repo/config", "control plane"},
		{"through dot-dot", NameWriteFile, "src/../.git/config", "control plane"},
		{"upper case", NameWriteFile, ".GIT/config", "control plane"},
		{"HFS+ ignorable code point", NameWriteFile, ".g\u200cit/config", "control plane"},
		{"NTFS trailing dot", NameWriteFile, ".git./config", "control plane"},
		{"NTFS short name", NameWriteFile, "GIT~1/config", "control plane"},
		{"a nested repository", NameWriteFile, "vendor/lib/.git/config", "control plane"},
		{"a hard link to .git/config", NameEditFile, "gitconfig-link", "control plane"},
		{"the policy", NameEditFile, "conf/policy.yaml", "kernel's own files"},
		{"the policy through a link", NameEditFile, "c/policy.yaml", "kernel's own files"},
		{"the policy, another case", NameWriteFile, "Conf/Policy.yaml", "kernel's own files"},
		{"a hard link to the policy", NameEditFile, "policy-link", "kernel's own files"},
		{"a discovery path that does not exist", NameWriteFile, "kernel.yaml", "kernel's own files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"path": tc.path, "content": "[core]\n\tfsmonitor = /tmp/x\n"}
			if tc.tool == NameEditFile {
				args = map[string]any{"path": tc.path, "old": "[core]", "new": "[core]\n\tfsmonitor = /tmp/x"}
			}
			raw, _ := jsonArgs(args)
			_, err := tools[tc.tool].Call(t.Context(), raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s %s: %v, want a refusal naming %q", tc.tool, tc.path, err, tc.want)
			}
		})
	}
	for _, f := range []string{".git/config", ".git/modules/sub/config", "conf/policy.yaml"} {
		if b, _ := os.ReadFile(filepath.Join(ws, f)); strings.Contains(string(b), "fsmonitor") {
			t.Errorf("%s was changed:\n%s", f, b)
		}
	}
	for _, f := range []string{".git/hooks/pre-commit", "kernel.yaml", "vendor/lib/.git/config"} {
		if _, err := os.Lstat(filepath.Join(ws, f)); err == nil {
			t.Errorf("%s was created", f)
		}
	}
	raw, _ := jsonArgs(map[string]any{"path": "src/main.go", "old": "package main", "new": "package main // edited"})
	if _, err := tools[NameEditFile].Call(t.Context(), raw); err != nil {
		t.Fatalf("an ordinary edit: %v", err)
	}
}

// TestGitWritableWhenGranted: an operator who granted <root>/.git
// read-write to commands lets the write tools change it too; the kernel's
// own files stay refused.
func TestGitWritableWhenGranted(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	cfg := Config{CommandSandbox: sandbox.Grant{FS: []sandbox.FSRule{{Path: filepath.Join(ws, ".git"), Mode: "rw"}}}}
	os.Mkdir(ws, 0o700)
	mkfiles(t, ws, map[string]string{".git/config": "[core]\n", "conf/policy.yaml": "name: p\n"})
	cfg.Root = ws
	cfg.Protected = []string{filepath.Join(ws, "conf", "policy.yaml")}
	ts, closer, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var edit kernel.Tool
	for _, tl := range ts {
		if tl.Spec().Name == NameEditFile {
			edit = tl
		}
	}
	raw, _ := jsonArgs(map[string]any{"path": ".git/config", "old": "[core]", "new": "[core]\n\tbare = false"})
	if _, err := edit.Call(t.Context(), raw); err != nil {
		t.Fatalf("edit .git/config with .git granted rw: %v", err)
	}
	raw, _ = jsonArgs(map[string]any{"path": "conf/policy.yaml", "old": "name: p", "new": "name: q"})
	if _, err := edit.Call(t.Context(), raw); err == nil {
		t.Fatal("the policy was edited")
	}
}

// TestFoldName: the names a file system may take for one another fold to
// the same string.
func TestFoldName(t *testing.T) {
	for _, n := range []string{".git", ".GIT", ".Git", ".git.", ".git  ", ".g\u200cit", "\ufeff.git", "git~1", "GIT~1"} {
		if !isDotGit(n) {
			t.Errorf("isDotGit(%q) = false", n)
		}
	}
	for _, n := range []string{"git", ".gitignore", ".github", ".git-blame-ignore-revs", "x.git"} {
		if isDotGit(n) {
			t.Errorf("isDotGit(%q) = true", n)
		}
	}
	// NFD and NFC spell the same name.
	if foldName("caf\u0065\u0301.yaml") != foldName("caf\u00e9.yaml") {
		t.Error("NFD and NFC fold differently")
	}
}

func jsonArgs(v any) (json.RawMessage, error) { return json.Marshal(v) }

// TestRootCheck: New hands RootCheck the directory it actually opened, so
// a workspace swapped between the kernel's check and the open is refused
// (the kernel compares it with a resumed session's recorded identity).
func TestRootCheck(t *testing.T) {
	ws := t.TempDir()
	other := t.TempDir()
	want, _ := os.Stat(ws)
	check := func(fi os.FileInfo) error {
		if !os.SameFile(fi, want) {
			return errors.New("not the recorded workspace")
		}
		return nil
	}
	if _, c, err := New(Config{Root: ws, RootCheck: check}); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, ws); err != nil {
		t.Fatal(err)
	}
	if _, _, err := New(Config{Root: ws, RootCheck: check}); err == nil || !strings.Contains(err.Error(), "not the recorded workspace") {
		t.Fatalf("New on a swapped workspace: %v", err)
	}
}
