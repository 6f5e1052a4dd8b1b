package subprocess

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/config"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWriteLock: the lock lists every file (links followed, caches and
// version control left out), sorted, in sha256sum's format, and its sha256
// is what WriteLock returns and LockSHA256 computes.
func TestWriteLock(t *testing.T) {
	dir := t.TempDir()
	lib := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"plugin.py": "print('x')", "pkg/a.py": "a", "pkg/__pycache__/a.cpython-311.pyc": "bytecode",
		"stale.pyc": "bytecode", ".git/HEAD": "ref", "data/b.txt": "b",
	})
	writeFiles(t, lib, map[string]string{"mod.py": "linked", "sub/x.py": "x"})
	if err := os.Symlink(lib, filepath.Join(dir, "lib")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("plugin.py", filepath.Join(dir, "alias.py")); err != nil {
		t.Fatal(err)
	}
	sum, n, err := WriteLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, LockFile))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parseLock(data)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		paths = append(paths, e.path)
	}
	want := []string{"alias.py", "data/b.txt", "lib/mod.py", "lib/sub/x.py", "pkg/a.py", "plugin.py"}
	if !slices.Equal(paths, want) || n != len(want) {
		t.Fatalf("locked %v (%d), want %v", paths, n, want)
	}
	if got, _ := config.FileSHA256(filepath.Join(dir, LockFile)); got != sum {
		t.Fatalf("WriteLock returned %s, the lock's sha256 is %s", sum, got)
	}
	if now, err := LockSHA256(dir); err != nil || now != sum {
		t.Fatalf("LockSHA256 = %s, %v; want %s", now, err, sum)
	}
	// sha256sum itself agrees.
	cmd := exec.Command("sha256sum", "--check", "--strict", "--quiet", LockFile)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c: %v\n%s", err, out)
	}
	if info, err := os.Lstat(filepath.Join(dir, LockFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("lock mode %v, %v", info.Mode(), err)
	}
	// A change shows.
	writeFiles(t, lib, map[string]string{"mod.py": "changed"})
	if now, _ := LockSHA256(dir); now == sum {
		t.Fatal("a change under a link does not change the lock")
	}
}

func TestWriteLockRefuses(t *testing.T) {
	t.Run("a loop", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(".", filepath.Join(dir, "self")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := WriteLock(dir); err == nil || !strings.Contains(err.Error(), "a loop") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a name with a line break", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"a\nb": "x"})
		if _, _, err := WriteLock(dir); err == nil || !strings.Contains(err.Error(), "cannot be locked") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a file", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"x": "x"})
		if _, _, err := WriteLock(filepath.Join(dir, "x")); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestParseLock(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, c := range []struct {
		name, lock, want string
	}{
		{"ok", sum + "  a.py\n" + sum + "  *b/c.py\n", ""},
		{"empty", "", "lists no file"},
		{"one space", sum + " a.py\n", "want"},
		{"short sum", "abc  a.py\n", "want"},
		{"upper case", strings.ToUpper(sum) + "  a.py\n", "lower-case hex"},
		{"absolute", sum + "  /etc/passwd\n", "not a clean path"},
		{"up", sum + "  ../x\n", "not a clean path"},
		{"unclean", sum + "  a/../b\n", "not a clean path"},
		{"itself", sum + "  " + LockFile + "\n", "cannot lock itself"},
		{"twice", sum + "  a\n" + sum + "  a\n", "listed twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseLock([]byte(c.lock))
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func FuzzParseLock(f *testing.F) {
	sum := strings.Repeat("0f", 32)
	f.Add([]byte(sum + "  a.py\n"))
	f.Add([]byte(sum + "  *dir/b.js\n" + sum + "  c\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseLock(data)
		if err != nil {
			return
		}
		for _, e := range entries {
			if filepath.IsAbs(e.path) || e.path == ".." || strings.HasPrefix(e.path, "../") || len(e.sum) != 64 {
				t.Fatalf("accepted %q", e.path)
			}
		}
	})
}

// TestCopyLocked: the copy holds exactly the locked files, each checked;
// a missing or changed file, or a lock that does not list the script, is
// refused.
func TestCopyLocked(t *testing.T) {
	setup := func(t *testing.T) (PluginConfig, string) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"plugin.js": "serve()", "lib/x.js": "x"})
		sum, _, err := WriteLock(dir)
		if err != nil {
			t.Fatal(err)
		}
		return PluginConfig{Name: "p", Path: filepath.Join(dir, "plugin.js"), SHA256: sum}, dir
	}
	t.Run("exactly the locked files", func(t *testing.T) {
		cfg, dir := setup(t)
		writeFiles(t, dir, map[string]string{"unlocked.js": "not pinned"})
		copyRoot, _, err := copyLocked(cfg, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		_ = filepath.WalkDir(copyRoot, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(copyRoot, p)
				got = append(got, rel)
			}
			return nil
		})
		if want := []string{"lib/x.js", "plugin.js"}; !slices.Equal(got, want) {
			t.Fatalf("copied %v, want %v", got, want)
		}
	})
	t.Run("a changed file", func(t *testing.T) {
		cfg, dir := setup(t)
		writeFiles(t, dir, map[string]string{"lib/x.js": "y"})
		_, _, err := copyLocked(cfg, t.TempDir())
		var he *HashError
		if !errors.As(err, &he) || he.Subject != SubjectLockedFile || !strings.HasSuffix(he.Path, "lib/x.js") || !errors.Is(err, ErrHashMismatch) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a missing file", func(t *testing.T) {
		cfg, dir := setup(t)
		if err := os.Remove(filepath.Join(dir, "lib/x.js")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := copyLocked(cfg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "which is missing") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a lock without the script", func(t *testing.T) {
		cfg, dir := setup(t)
		cfg.Path = filepath.Join(dir, "other.js")
		if _, _, err := copyLocked(cfg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "does not list the script other.js") {
			t.Fatalf("err = %v", err)
		}
	})
}
