package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// escapeEnv is a workspace with every kind of way out planted in it:
//
//	abs_file   -> <outside>/secret.txt        (absolute symlink to a file)
//	rel_file   -> ../outside/secret.txt       (relative symlink to a file)
//	out_dir    -> ../outside                  (symlink to a directory)
//	chain1     -> chain2 -> ../outside/secret.txt (symlink chain)
//	chain_dir  -> out_dir                     (chain to a directory)
//	dangling   -> ../outside/created.txt      (symlink to a missing file outside)
//	sub/deep   -> ../../outside/secret.txt    (escape from a subdirectory)
//
// plus in-workspace links that must keep working:
//
//	in_file -> docs/a.txt, in_dir -> docs, sub/up -> ../docs/a.txt
func escapeEnv(t testing.TB) *env {
	t.Helper()
	e := newEnv(t, Config{})
	mkfiles(t, e.root, map[string]string{"docs/a.txt": "inside\n", "sub/keep.txt": "keep\n"})
	symlink(t, e.root, filepath.Join(e.outside, "secret.txt"), "abs_file")
	symlink(t, e.root, "../outside/secret.txt", "rel_file")
	symlink(t, e.root, "../outside", "out_dir")
	symlink(t, e.root, "chain2", "chain1")
	symlink(t, e.root, "../outside/secret.txt", "chain2")
	symlink(t, e.root, "out_dir", "chain_dir")
	symlink(t, e.root, "../outside/created.txt", "dangling")
	symlink(t, e.root, "../../outside/secret.txt", "sub/deep")
	symlink(t, e.root, "docs/a.txt", "in_file")
	symlink(t, e.root, "docs", "in_dir")
	symlink(t, e.root, "../docs/a.txt", "sub/up")
	return e
}

// escapingFiles are paths that all lead to <outside>/secret.txt.
func escapingFiles(e *env) []string {
	return []string{
		"../outside/secret.txt",
		"sub/../../outside/secret.txt",
		filepath.Join(e.outside, "secret.txt"),
		"/etc/passwd",
		"abs_file",
		"rel_file",
		"out_dir/secret.txt",
		"chain1",
		"chain_dir/secret.txt",
		"sub/deep",
	}
}

// escapingDirs are paths that all lead to <outside> (or out of the root).
func escapingDirs(e *env) []string {
	return []string{"..", "../outside", "/etc", e.outside, "out_dir", "chain_dir", "out_dir/dir", "sub/../.."}
}

func assertEscape(t *testing.T, err error, content string) {
	t.Helper()
	if err == nil {
		t.Fatalf("escape was not refused; result: %q", content)
	}
	if !errors.Is(err, ErrEscapes) {
		t.Fatalf("error %q is not an escape error", err)
	}
	if !strings.Contains(err.Error(), "escapes the workspace") {
		t.Fatalf("error %q does not say the path escapes the workspace", err)
	}
	if strings.Contains(content, secret) || strings.Contains(err.Error(), secret) {
		t.Fatal("the secret leaked")
	}
}

func TestEscapeReadFile(t *testing.T) {
	e := escapeEnv(t)
	for _, p := range escapingFiles(e) {
		t.Run(p, func(t *testing.T) {
			res, err := e.call(t, "read_file", map[string]any{"path": p})
			assertEscape(t, err, res.Content)
		})
	}
}

// TestAbsoluteSymlinkInside: os.Root refuses absolute symbolic links even
// when they point inside the root (documented in docs/builtin-tools.md).
func TestAbsoluteSymlinkInside(t *testing.T) {
	e := escapeEnv(t)
	symlink(t, e.root, filepath.Join(e.root, "docs", "a.txt"), "abs_inside")
	res, err := e.call(t, "read_file", map[string]any{"path": "abs_inside"})
	assertEscape(t, err, res.Content)
}

func TestEscapeListDir(t *testing.T) {
	e := escapeEnv(t)
	for _, p := range escapingDirs(e) {
		t.Run(p, func(t *testing.T) {
			res, err := e.call(t, "list_dir", map[string]any{"path": p})
			assertEscape(t, err, res.Content)
		})
	}
	t.Run("deep listing does not follow links out", func(t *testing.T) {
		out := e.mustCall(t, "list_dir", map[string]any{"depth": 5})
		if strings.Contains(out, "inner.txt") || strings.Contains(out, "\nout_dir/") || strings.Contains(out, "\nchain_dir/") {
			t.Fatalf("listing shows files outside the workspace:\n%s", out)
		}
		if !strings.Contains(out, "out_dir -> ../outside  [symlink outside the workspace, not accessible]") {
			t.Fatalf("listing does not flag the escaping link:\n%s", out)
		}
	})
}

func TestEscapeSearch(t *testing.T) {
	e := escapeEnv(t)
	for _, p := range append(escapingDirs(e), escapingFiles(e)...) {
		t.Run(p, func(t *testing.T) {
			res, err := e.call(t, "search", map[string]any{"pattern": "TOPSECRET", "path": p})
			assertEscape(t, err, res.Content)
		})
	}
	t.Run("whole workspace finds nothing outside", func(t *testing.T) {
		out := e.mustCall(t, "search", map[string]any{"pattern": "TOPSECRET"})
		if !strings.HasPrefix(out, "search: no matches for text `TOPSECRET`") {
			t.Fatalf("search reached outside the workspace:\n%s", out)
		}
	})
}

func TestEscapeWriteFile(t *testing.T) {
	e := escapeEnv(t)
	// /etc/passwd is left out: were the protection broken, this test must
	// not damage the machine. The absolute path to secret.txt covers it.
	targets := []string{"dangling", "out_dir/new.txt", "chain_dir/dir/new.txt", "out_dir/newdir/x.txt"}
	for _, p := range escapingFiles(e) {
		if p != "/etc/passwd" {
			targets = append(targets, p)
		}
	}
	for _, p := range targets {
		t.Run(p, func(t *testing.T) {
			res, err := e.call(t, "write_file", map[string]any{"path": p, "content": "pwned\n"})
			assertEscape(t, err, res.Content)
			assertOutsideIntact(t, e)
		})
	}
}

func TestEscapeEditFile(t *testing.T) {
	e := escapeEnv(t)
	for _, p := range escapingFiles(e) {
		t.Run(p, func(t *testing.T) {
			res, err := e.call(t, "edit_file", map[string]any{"path": p, "old": "TOPSECRET", "new": "pwned"})
			assertEscape(t, err, res.Content)
			assertOutsideIntact(t, e)
		})
	}
}

// assertOutsideIntact checks nothing outside the workspace changed.
func assertOutsideIntact(t testing.TB, e *env) {
	t.Helper()
	for _, f := range []string{"secret.txt", "dir/inner.txt"} {
		b, err := os.ReadFile(filepath.Join(e.outside, f))
		if err != nil || string(b) != secret+"\n" {
			t.Fatalf("outside file %s changed: %q, %v", f, b, err)
		}
	}
	for _, f := range []string{"created.txt", "new.txt", "dir/new.txt", "newdir"} {
		if _, err := os.Lstat(filepath.Join(e.outside, f)); err == nil {
			t.Fatalf("%s was created outside the workspace", f)
		}
	}
}

// TestInsideSymlinks checks that links staying inside the workspace work
// for every file tool.
func TestInsideSymlinks(t *testing.T) {
	e := escapeEnv(t)
	tests := []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"read link to file", "read_file", map[string]any{"path": "in_file"}, "     1\tinside\n"},
		{"read through dir link", "read_file", map[string]any{"path": "in_dir/a.txt"}, "     1\tinside\n"},
		{"read link climbing inside", "read_file", map[string]any{"path": "sub/up"}, "     1\tinside\n"},
		{"read .. that stays inside", "read_file", map[string]any{"path": "sub/../docs/a.txt"}, "     1\tinside\n"},
		{"list dir link", "list_dir", map[string]any{"path": "in_dir"}, "in_dir/a.txt  7 B\n"},
		{"search dir link", "search", map[string]any{"pattern": "inside", "path": "in_dir"}, "in_dir/a.txt (1 matching line)"},
		{"edit through link", "edit_file", map[string]any{"path": "in_file", "old": "inside", "new": "edited"}, "edited in_file"},
		{"write through link", "write_file", map[string]any{"path": "sub/up", "content": "written\n"}, "wrote 8 bytes to sub/up"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := e.mustCall(t, tc.tool, tc.args)
			if !strings.Contains(out, tc.want) {
				t.Fatalf("got %q, want it to contain %q", out, tc.want)
			}
		})
	}
	if got := e.read(t, "docs/a.txt"); got != "written\n" {
		t.Fatalf("docs/a.txt = %q after writing through the link", got)
	}
	if fi, err := os.Lstat(filepath.Join(e.root, "sub/up")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("sub/up is no longer a symlink: %v", err)
	}
}

// FuzzPathConfinement feeds arbitrary paths to every tool that reads (and
// to edit_file, with an old text only the outside files contain): the
// secret outside the workspace must never come back and the outside files
// must never change. write_file is left out so a broken build could not
// overwrite files of the machine running the fuzzer.
func FuzzPathConfinement(f *testing.F) {
	e := escapeEnv(f)
	for _, p := range append(escapingFiles(e), escapingDirs(e)...) {
		f.Add(p)
	}
	for _, p := range []string{".", "", "docs/a.txt", "in_dir/../out_dir", "./../outside", "docs/../../outside/secret.txt", "out_dir/..", "a\x00b", "//etc", `..\\outside`} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"read_file", map[string]any{"path": p}},
			{"list_dir", map[string]any{"path": p, "depth": 3}},
			{"search", map[string]any{"pattern": "TOPSECRET", "path": p}},
			{"edit_file", map[string]any{"path": p, "old": secret, "new": "pwned"}},
		} {
			res, err := e.call(t, c.tool, c.args)
			if strings.Contains(res.Content, secret) || (err != nil && strings.Contains(err.Error(), secret)) {
				t.Fatalf("%s %q leaked the secret: %q, %v", c.tool, p, res.Content, err)
			}
		}
		assertOutsideIntact(t, e)
	})
}
