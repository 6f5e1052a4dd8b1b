package treetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fileState is what a test needs to know of a built file: its bytes' hash
// and modification time.
type fileState struct {
	sum   string
	mtime time.Time
	data  []byte
}

func stat(t *testing.T, path string) fileState {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return fileState{sum: hex.EncodeToString(sum[:]), mtime: info.ModTime(), data: data}
}

// marker is Go source for package pkg whose init keeps text in the binary
// that links the package.
func marker(pkg, text string) string {
	return "package " + pkg + "\n\nimport \"os\"\n\nfunc init() {\n\tif os.Getenv(\"AGENTKERNEL_TREETEST\") == \"" + text + "\" {\n\t\tprintln(\"" + text + "\")\n\t}\n}\n"
}

// TestMakeRebuildsWhatChanged: `make build` and `make plugins` rebuild a
// binary when anything it imports changes, wherever that is (here: a
// package under internal/, the launcher's main package, a package only the
// git plugin and the kernel share), keep the launcher's sha256 that
// bin/kernel pins and the plugin's .sha256 file right, and with nothing
// changed leave every binary as it was (same bytes, same mtime).
func TestMakeRebuildsWhatChanged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kernel in a scratch copy of the tree")
	}
	t.Parallel()
	dir := scratch(t)
	kernel := filepath.Join(dir, "bin", "kernel")
	launcher := filepath.Join(dir, "bin", "agentkernel-sandbox-init")
	makeBuild := func() string {
		out, _ := run(t, dir, true, "make", "build")
		return out
	}
	// The launcher's sha256 is linked into bin/kernel (-X
	// ...launcherSHA256=), so its text is in the binary's data; `go
	// version -m` does not list -ldflags of a -trimpath build.
	pinned := func() {
		t.Helper()
		if k, l := stat(t, kernel), stat(t, launcher); !bytes.Contains(k.data, []byte(l.sum)) {
			t.Errorf("bin/kernel does not pin the launcher's sha256 %s", l.sum)
		}
	}

	makeBuild()
	pinned()
	k0, l0 := stat(t, kernel), stat(t, launcher)
	if out := makeBuild(); strings.Contains(out, "build ") {
		t.Errorf("make build with nothing changed built something:\n%s", out)
	}
	if k, l := stat(t, kernel), stat(t, launcher); k.sum != k0.sum || !k.mtime.Equal(k0.mtime) || l.sum != l0.sum || !l.mtime.Equal(l0.mtime) {
		t.Errorf("make build with nothing changed rewrote a binary: kernel %v -> %v, launcher %v -> %v", k0.mtime, k.mtime, l0.mtime, l.mtime)
	}

	t.Run("a package under internal/", func(t *testing.T) {
		const text = "treetest-internal-supervise"
		writeFile(t, dir, "internal/supervise/zz_treetest.go", marker("supervise", text))
		out := makeBuild()
		k := stat(t, kernel)
		if k.sum == k0.sum || !bytes.Contains(k.data, []byte(text)) {
			t.Fatalf("bin/kernel was not rebuilt after a change in internal/supervise:\n%s", out)
		}
		if l := stat(t, launcher); l.sum != l0.sum {
			t.Errorf("the launcher was rebuilt, though it does not import internal/supervise:\n%s", out)
		}
		pinned()
	})

	t.Run("the launcher", func(t *testing.T) {
		const text = "treetest-sandbox-init"
		writeFile(t, dir, "cmd/sandbox-init/zz_treetest.go", marker("main", text))
		k1 := stat(t, kernel)
		out := makeBuild()
		if l := stat(t, launcher); l.sum == l0.sum || !bytes.Contains(l.data, []byte(text)) {
			t.Fatalf("the launcher was not rebuilt after a change in cmd/sandbox-init:\n%s", out)
		}
		if k := stat(t, kernel); k.sum == k1.sum {
			t.Errorf("bin/kernel was not linked again with the new launcher's sha256:\n%s", out)
		}
		pinned()
	})

	t.Run("the git plugin", func(t *testing.T) {
		plugin := filepath.Join(dir, "bin", "plugins", "git")
		pin := func() {
			t.Helper()
			b, err := os.ReadFile(plugin + ".sha256")
			if err != nil {
				t.Fatal(err)
			}
			if p := stat(t, plugin); !strings.HasPrefix(string(b), p.sum+" ") {
				t.Errorf("bin/plugins/git.sha256 says %q, the plugin's sha256 is %s", b, p.sum)
			}
		}
		run(t, dir, true, "make", "plugins")
		pin()
		p0 := stat(t, plugin)
		const text = "treetest-config-names"
		writeFile(t, dir, "internal/config/names/zz_treetest.go", marker("names", text))
		out, _ := run(t, dir, true, "make", "plugins")
		if p := stat(t, plugin); p.sum == p0.sum || !bytes.Contains(p.data, []byte(text)) {
			t.Fatalf("bin/plugins/git was not rebuilt after a change in internal/config/names:\n%s", out)
		}
		pin()
	})
}

// TestMakeSkipsGoBuildInACleanCheckout: in a git checkout with a clean
// tree, a binary built from the same commit is not handed to go build
// again (scripts/gobuild.sh keeps its fingerprint in bin/.gobuild); a
// change to the tree, a commit, or the binary changed behind make's back
// each go to go build, which rebuilds what changed. "go build" here is a
// wrapper that records every build it is asked for.
func TestMakeSkipsGoBuildInACleanCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the launcher in a scratch copy of the tree")
	}
	t.Parallel()
	dir := scratch(t)
	// The scratch copy is a repository of its own: git must never reach
	// the checkout's (a linked worktree's .git file copied in once made
	// these commits on the checkout's branch).
	if _, err := os.Lstat(filepath.Join(dir, ".git")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the scratch copy has a .git (%v): git would work on the checkout's repository", err)
	}
	gitEnv := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_DIR=" + filepath.Join(dir, ".git"), "GIT_WORK_TREE=" + dir, "GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir)}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), gitEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "scratch")

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	builds := filepath.Join(t.TempDir(), "builds")
	wrapper := filepath.Join(t.TempDir(), "go")
	writeFile(t, "/", wrapper, "#!/bin/sh\n[ \"$1\" = build ] && echo build >> "+builds+"\nexec "+goBin+" \"$@\"\n")
	if err := os.Chmod(wrapper, 0o755); err != nil {
		t.Fatal(err)
	}
	launcher := filepath.Join(dir, "bin", "agentkernel-sandbox-init")
	goBuilds := func() int {
		b, _ := os.ReadFile(builds)
		return strings.Count(string(b), "build\n")
	}
	makeLauncher := func() (string, int) {
		t.Helper()
		n := goBuilds()
		out, _ := run(t, dir, true, "make", "GO="+wrapper, "bin/agentkernel-sandbox-init")
		return out, goBuilds() - n
	}

	if _, n := makeLauncher(); n != 1 {
		t.Fatalf("the first make ran go build %d times, want 1", n)
	}
	l0 := stat(t, launcher)
	if out, n := makeLauncher(); n != 0 || strings.Contains(out, "build ") {
		t.Errorf("a clean checkout at the same commit ran go build %d times:\n%s", n, out)
	}

	const text = "treetest-fast-path"
	writeFile(t, dir, "cmd/sandbox-init/zz_treetest.go", marker("main", text))
	if out, n := makeLauncher(); n != 1 || !bytes.Contains(stat(t, launcher).data, []byte(text)) {
		t.Fatalf("a change to the tree (uncommitted) did not rebuild the launcher (%d go builds):\n%s", n, out)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "marker")
	if out, n := makeLauncher(); n != 1 || strings.Contains(out, "build ") {
		t.Errorf("a commit of what was built: %d go builds (want 1, a no-op), output:\n%s", n, out)
	}
	if out, n := makeLauncher(); n != 0 {
		t.Errorf("the clean checkout after the commit ran go build %d times:\n%s", n, out)
	}

	// The binary replaced behind make's back (a newer file) goes to go
	// build, which puts back the one the tree makes.
	if err := os.WriteFile(launcher, l0.data, 0o755); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour) // newer than the fingerprint, whatever the clock's grain
	if err := os.Chtimes(launcher, later, later); err != nil {
		t.Fatal(err)
	}
	if out, n := makeLauncher(); n != 1 || !bytes.Contains(stat(t, launcher).data, []byte(text)) {
		t.Errorf("a replaced binary was not rebuilt (%d go builds):\n%s", n, out)
	}
}
