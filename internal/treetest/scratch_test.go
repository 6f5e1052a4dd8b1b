package treetest

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// root is the module's root directory.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return r
}

// scratch copies the source tree (not bin/, .git, WASM binaries or
// notCopied) into a directory of the test's own and returns it, so the
// tests that build run side by side (t.Parallel): each edits, builds and
// commits only in its copy. The directory is the same for every run of
// the test in this checkout, and a lock keeps two runs apart; it is
// removed afterwards.
// Where the copy is does not matter to go build's cache: the go commands
// run -trimpath (run), so a package the test does not change has the
// checkout's cache key, whichever directory it is compiled in.
func scratch(t *testing.T) string {
	t.Helper()
	src := root(t)
	sum := sha256.Sum256([]byte(src))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("agentkernel-treetest-%x-%s", sum[:6], strings.ReplaceAll(t.Name(), "/", "_")))
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(dir)
		syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
	})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	left := 0
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.Name() == ".git" {
			// A directory in a clone, a file ("gitdir: ...") in a linked
			// worktree: either way the checkout's repository, which a
			// scratch copy must never reach (git run in the copy would
			// work on the checkout's branch and index).
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			switch d.Name() {
			case "bin", "node_modules":
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() || strings.HasSuffix(path, ".wasm") {
			return nil
		}
		if notCopied[filepath.ToSlash(rel)] {
			left++
			return nil
		}
		return copyFile(path, filepath.Join(dir, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	if left != len(notCopied) {
		t.Errorf("the checkout has %d of the %d files notCopied names: update the list", left, len(notCopied))
	}
	return dir
}

// notCopied are the files the scratch copy leaves out: no command a test
// runs there compiles them for a test it runs, and they would cost a
// fresh clone's `make test` compiles nothing else needs.
// serve/browser_test.go is serve's one file that imports chromedp: with
// it, `make generate`'s serve test binary (its TestGenerated* tests)
// compiled chromedp, cdproto and go-json-experiment (69 packages) outside
// -race, for nothing but the scratch copy; its browser tests run in the
// checkout's `go test -race ./serve/` (RATIONALE.md, "The scratch tree's
// tests side by side (issue 45)").
var notCopied = map[string]bool{"serve/browser_test.go": true}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// run runs a command in dir and returns its combined output; a failure
// ends the test unless fail is false.
//
// Every go command it runs (directly, or through make) runs with
// -trimpath and, for go test, -vet=off. -trimpath takes the scratch
// directory out of go build's cache keys: the packages the scratch copy
// does not change are the ones the checkout's make build compiled
// (bin/kernel is built -trimpath for this), not a second compile of the
// module under another directory. These tests hold the tree's build, its
// generated files and its tests to what the docs say; vet of the scratch
// copy's packages checks nothing the checkout's own go vet and go test do
// not (RATIONALE.md, "make test shares the scratch tree's build (issue
// 45)"). -ldflags=-s -w, as make test links its own test binaries: no
// symbol table or DWARF to write, about 40% of a link's CPU (a command's
// own -ldflags, as make build's, still wins).
func run(t *testing.T, dir string, fail bool, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath -vet=off '-ldflags=-s -w'"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	// What each command cost, for the test log (docs/scaling.md, "make
	// test"): wall time, and the CPU time of the command and every process
	// it waited for (the compiler, the linker, the tests it ran).
	if ps := cmd.ProcessState; ps != nil {
		t.Logf("%s %s: %.1fs wall, %.1fs cpu", name, strings.Join(args, " "), time.Since(start).Seconds(), (ps.UserTime() + ps.SystemTime()).Seconds())
	}
	if err != nil && fail {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out), err
}

// writeFile writes a file of the scratch tree.
func writeFile(t *testing.T, dir, rel, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, rel), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// edit replaces old, which must occur exactly once, by new in a file of the
// scratch tree.
func edit(t *testing.T, dir, rel, old, new string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), old); n != 1 {
		t.Fatalf("%s has %d copies of %q, want 1: the tree changed under this test, update the test (and the docs it follows) with it", rel, n, old)
	}
	writeFile(t, dir, rel, strings.Replace(string(data), old, new, 1))
}
