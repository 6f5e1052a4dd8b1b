package sandbox_test

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
)

// dedicatedLauncher returns bin/agentkernel-sandbox-init, which `make
// build` puts there. `make test` sets AGENTKERNEL_REQUIRE_ARTIFACTS=1, so
// there a missing launcher fails; a bare `go test` skips.
func dedicatedLauncher(tb testing.TB) (path, sum string) {
	tb.Helper()
	p, err := filepath.Abs(filepath.Join("..", "bin", sandbox.LauncherName))
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		if os.Getenv("AGENTKERNEL_REQUIRE_ARTIFACTS") == "1" {
			tb.Fatalf("%s is missing: make build puts it there (%v)", p, err)
		}
		tb.Skipf("%s is missing: run `make build` first, or `make test`", p)
	}
	h := sha256.Sum256(b)
	return p, hex.EncodeToString(h[:])
}

// useDedicatedLauncher switches Command to the dedicated launcher for the
// rest of tb.
func useDedicatedLauncher(tb testing.TB) {
	tb.Helper()
	p, sum := dedicatedLauncher(tb)
	if err := sandbox.UseLauncher(p, sum); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sandbox.UseLauncher("", "") })
}

// TestDedicatedLauncher runs the attack tests again with the small
// launcher the kernel uses instead of re-executing itself: every layer
// must hold the same way.
func TestDedicatedLauncher(t *testing.T) {
	useDedicatedLauncher(t)
	runAttackTests(t)
}

// TestLauncherRefused: a launcher whose hash is not the pinned one, or
// that others may write, is refused; the one in use stays.
func TestLauncherRefused(t *testing.T) {
	p, sum := dedicatedLauncher(t)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), sandbox.LauncherName)
	if err := os.WriteFile(other, append(b, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	err = sandbox.UseLauncher(other, sum)
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("a launcher with another hash was accepted: %v", err)
	}
	if err := os.Chmod(other, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.UseLauncher(other, ""); err == nil || !strings.Contains(err.Error(), "writable") {
		t.Fatalf("a launcher writable by others was accepted: %v", err)
	}
}

// TestLauncherIsWhatRuns: the program given to UseLauncher is what starts,
// and a launcher that is not agentkernel's does not count as a run.
func TestLauncherIsWhatRuns(t *testing.T) {
	if err := sandbox.UseLauncher("/bin/true", ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sandbox.UseLauncher("", "") })
	ws := newWorkspace(t)
	out, err := run(t, workspaceGrant(ws), ws, "sh", "-c", "echo x > marker")
	if err == nil || !strings.Contains(err.Error(), "without reporting") {
		t.Fatalf("a launcher that is not agentkernel's counted as a run: %v %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker")); err == nil {
		t.Fatal("the program ran although the launcher was /bin/true")
	}
}

// TestLauncherRewrittenAfterCheck: rewriting the launcher's file after the
// kernel checked it changes nothing (it runs from a sealed copy). Without
// the copy, the rewritten file (a script writing a marker) would run,
// unconfined, as the sandbox's init.
func TestLauncherRewrittenAfterCheck(t *testing.T) {
	p, sum := dedicatedLauncher(t)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyPath := filepath.Join(dir, sandbox.LauncherName)
	if err := os.WriteFile(copyPath, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.UseLauncher(copyPath, sum); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sandbox.UseLauncher("", "") })
	marker := filepath.Join(dir, "pwned")
	if err := os.WriteFile(copyPath, []byte("#!/bin/sh\necho x > "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t)
	out, err := run(t, workspaceGrant(ws), ws, "sh", "-c", "echo ok")
	if err != nil || out != "ok\n" {
		t.Fatalf("confined run after the rewrite: %v %q", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the rewritten launcher file ran")
	}
}

// TestLauncherLinksNoGrantDecoding: the dedicated launcher `make build`
// makes is built with the agentkernel_launcher tag, which leaves out what
// only the kernel needs (grant_yaml.go: yaml.v3, internal/config), so
// that their package initialisers do not run at every sandbox's start.
// It reads the binary's own build information.
func TestLauncherLinksNoGrantDecoding(t *testing.T) {
	p, _ := dedicatedLauncher(t)
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	tagged := false
	for _, s := range bi.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), sandbox.LauncherBuildTag) {
			tagged = true
		}
	}
	if !tagged {
		t.Errorf("%s was not built with -tags agentkernel_launcher (settings %v)", p, bi.Settings)
	}
	for _, d := range bi.Deps {
		if d.Path == "gopkg.in/yaml.v3" {
			t.Errorf("%s links %s: the launcher never decodes a grant", p, d.Path)
		}
	}
}
