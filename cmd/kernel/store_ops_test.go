package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/store/badger"
)

// TestRunFailsBeforeAnnouncingOnAFullVolume: a store whose volume cannot
// hold one step (here: a reserve larger than any disk) fails the run
// before "session … (new)" is printed.
func TestRunFailsBeforeAnnouncingOnAFullVolume(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs(demoConfig)
	cfg := filepath.Join(dir, "kernel.yaml")
	b, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.ReplaceAll(string(b), "script: script.yaml", "script: "+filepath.Join(filepath.Dir(abs), "script.yaml"))
	y = strings.ReplaceAll(y, "workspace: ../../../../examples/demo/workspace", "workspace: "+filepath.Join(filepath.Dir(abs), "../../../../examples/demo/workspace"))
	y += "store:\n  min_free_bytes: 1000000000000000000\n"
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := cli(t, "run", "--config", cfg, "--store", filepath.Join(dir, "store"), "hello")
	if !errors.Is(err, badger.ErrDiskFull) {
		t.Fatalf("run on a full volume = %v, want ErrDiskFull\n%s", err, errOut)
	}
	if strings.Contains(errOut, "(new)") {
		t.Fatalf("the session was announced before the run failed:\n%s", errOut)
	}
}

// TestExportIsPrivate: `sessions export -o` writes 0600 under umask 000,
// and narrows an existing file.
func TestExportIsPrivate(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	if _, errOut, err := cli(t, "run", "--config", demoConfig, "--store", store, "What does this project do, and where is its entry point?"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	out, _, err := cli(t, "sessions", "ls", "--config", demoConfig, "--store", store)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("ls: %q", out)
	}
	id := strings.Fields(lines[1])[0]
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for _, pre := range []bool{false, true} {
		path := filepath.Join(dir, "export.jsonl")
		if pre {
			if err := os.WriteFile(path, nil, 0o666); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(path, 0o666)
		}
		if _, errOut, err := cli(t, "sessions", "export", "--config", demoConfig, "--store", store, "-o", path, id); err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
			t.Fatalf("export (existing file %t) has mode %v, size %d; want 0600", pre, fi.Mode().Perm(), fi.Size())
		}
		os.Remove(path)
	}
}
