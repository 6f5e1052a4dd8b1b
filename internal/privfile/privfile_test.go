//go:build unix

package privfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// warnings collects what a repair says.
type warnings []string

func (w *warnings) warn(msg string) { *w = append(*w, msg) }

// asNobody gives p to uid 65534 (needs root) and reports whether it could.
func asNobody(t *testing.T, p string) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	if err := os.Lchown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return true
}

// withUmask runs fn under umask m (the process's: these tests are not
// parallel).
func withUmask(m int, fn func()) {
	old := syscall.Umask(m)
	defer syscall.Umask(old)
	fn()
}

// TestDirRefusesWhatOthersCouldWrite: a directory group or others may
// write, or that another user owns (directly or behind a link), is
// refused and left as it was: narrowing it would not remove what was put
// in it.
func TestDirRefusesWhatOthersCouldWrite(t *testing.T) {
	for _, mode := range []os.FileMode{0o770, 0o707, 0o777, 0o720} {
		d := filepath.Join(t.TempDir(), "cache")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, mode)
		var w warnings
		err := Dir(d, "the test cache", w.warn)
		if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "chmod 700 "+d) || !strings.Contains(err.Error(), "the test cache") {
			t.Errorf("mode %04o: %v", mode, err)
		}
		if fi, _ := os.Stat(d); fi.Mode().Perm() != mode {
			t.Errorf("mode %04o was changed to %04o", mode, fi.Mode().Perm())
		}
	}

	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if !asNobody(t, theirs) {
		t.Log("not root: the other-owner cases need chown")
		return
	}
	if err := Dir(theirs, "the test cache", nil); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("another user's directory: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(theirs, link); err != nil {
		t.Fatal(err)
	}
	if err := Dir(link, "the test cache", nil); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("a link to another user's directory: %v", err)
	}
}

// TestDirRepairsWhatOthersCouldRead: a directory of ours that others may
// read or enter, but not write, is narrowed to 0700 with one warning; a
// private one is left alone without a word; a missing one is created 0700
// whatever the umask.
func TestDirRepairsWhatOthersCouldRead(t *testing.T) {
	d := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	var w warnings
	if err := Dir(d, "the session store", w.warn); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %04o, want 0700", fi.Mode().Perm())
	}
	if len(w) != 1 || !strings.Contains(w[0], "had mode 0755") || !strings.Contains(w[0], "narrowed to 0700") {
		t.Errorf("warnings %q", w)
	}
	w = nil
	if err := Dir(d, "the session store", w.warn); err != nil || len(w) != 0 {
		t.Errorf("a private directory: %v, warnings %q", err, w)
	}

	withUmask(0, func() {
		fresh := filepath.Join(t.TempDir(), "a", "b")
		if err := Dir(fresh, "x", w.warn); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
			t.Errorf("created with mode %04o under umask 0, want 0700", fi.Mode().Perm())
		}
	})
	withUmask(0o277, func() { // a umask that takes the owner's own bits
		fresh := filepath.Join(t.TempDir(), "c")
		if err := Dir(fresh, "x", nil); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
			t.Errorf("created with mode %04o under umask 0277, want 0700", fi.Mode().Perm())
		}
	})

	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o600)
	if err := Dir(file, "x", nil); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: %v", err)
	}
}

// TestOpenRefusesPlantedFiles: a file the kernel trusts is read only when
// it is a regular file of this user that nobody else could write; a link
// is not followed (its target is not read), a FIFO does not block.
func TestOpenRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(secret, []byte("not the kernel's"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(secret, link)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	writable := filepath.Join(dir, "writable")
	os.WriteFile(writable, []byte("x"), 0o600)
	os.Chmod(writable, 0o620)
	cases := []struct {
		name, path string
		is         error
		says       string
	}{
		{"symlink", link, ErrLink, "is a symbolic link"},
		{"fifo", fifo, nil, "not a regular file"},
		{"directory", dir, nil, "not a regular file"},
		{"group-writable", writable, ErrNotPrivate, "chmod 600"},
	}
	theirs := filepath.Join(dir, "theirs")
	os.WriteFile(theirs, []byte("x"), 0o600)
	if asNobody(t, theirs) {
		cases = append(cases, struct {
			name, path string
			is         error
			says       string
		}{"another user's", theirs, ErrNotPrivate, "belongs to uid 65534"})
	}
	for _, tc := range cases {
		b, err := ReadFile(tc.path, 1<<10, nil)
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: read %q, error %v", tc.name, b, err)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 10, nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 100), 0o600)
	if _, err := ReadFile(big, 10, nil); err == nil {
		t.Error("a file over the limit was read")
	}
}

// TestOpenRepairsReadableFiles: a file of ours that others could only
// read is narrowed to 0600 and read, with one warning.
func TestOpenRepairsReadableFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys.json")
	os.WriteFile(p, []byte("{}"), 0o600)
	os.Chmod(p, 0o644)
	var w warnings
	b, err := ReadFile(p, 100, w.warn)
	if err != nil || string(b) != "{}" {
		t.Fatalf("%q, %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}
	if len(w) != 1 || !strings.Contains(w[0], "had mode 0644") {
		t.Errorf("warnings %q", w)
	}
}

// TestOpenWriteRefusesLinks: the kernel's in-place writes are 0600 whatever
// was there, and refuse a symbolic link, a hard-linked file and a FIFO,
// leaving each untouched.
func TestOpenWriteRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "events.jsonl")
	os.WriteFile(p, []byte("old content\n"), 0o644)
	f, err := OpenWrite(p, false)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new\n")
	f.Close()
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Errorf("not truncated: %q", b)
	}
	f, err = OpenWrite(p, true)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("more\n")
	f.Close()
	if b, _ := os.ReadFile(p); string(b) != "new\nmore\n" {
		t.Errorf("not appended: %q", b)
	}

	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("the operator's file\n"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(victim, link)
	hard := filepath.Join(dir, "hard")
	if err := os.Link(victim, hard); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o600)
	for name, path := range map[string]string{"symlink": link, "hard link": hard, "fifo": fifo} {
		if f, err := OpenWrite(path, false); err == nil {
			f.Close()
			t.Errorf("%s: opened for writing", name)
		} else if name != "fifo" && !errors.Is(err, ErrLink) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "the operator's file\n" {
		t.Errorf("the target changed: %q", b)
	}
	if fi, _ := os.Stat(victim); fi.Mode().Perm() != 0o644 {
		t.Errorf("the target's mode changed to %04o", fi.Mode().Perm())
	}
}

// TestWriteFileReplacesLinks: a replaced file is written beside its name
// and renamed over it: a link planted in its place is replaced, its
// target untouched, and the file is 0600 whatever the umask.
func TestWriteFileReplacesLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("the operator's file\n"), 0o644)
	p := filepath.Join(dir, "keys.json")
	os.Symlink(victim, p)
	withUmask(0, func() {
		if err := WriteFile(p, []byte("{}\n"), true); err != nil {
			t.Fatal(err)
		}
	})
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "the operator's file\n" {
		t.Errorf("written through the link: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// TestLockRefusesLinks: a lock file is never created through a link.
func TestLockRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	link := filepath.Join(dir, ".lock")
	os.Symlink(victim, link)
	if _, err := Lock(link); !errors.Is(err, ErrLink) {
		t.Errorf("lock through a link: %v", err)
	}
	if _, err := os.Stat(victim); err == nil {
		t.Error("the link's target was created")
	}
	unlock, err := Lock(filepath.Join(dir, "ok.lock"))
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}

// TestNarrowTree: what a library made inside a private directory is
// narrowed quietly; links are not followed.
func TestNarrowTree(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "000001.vlog"), nil, 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, nil, 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	if n := NarrowTree(dir); n != 2 {
		t.Errorf("narrowed %d, want 2", n)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "000001.vlog")); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %04o", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Join(dir, "sub")); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %04o", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o644 {
		t.Errorf("followed the link: %04o", fi.Mode().Perm())
	}
}

// TestTempDir: a fresh private directory whatever the umask.
func TestTempDir(t *testing.T) {
	withUmask(0, func() {
		d, err := TempDir(t.TempDir(), "agentkernel-plugins-")
		if err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 || !filepath.IsAbs(d) {
			t.Errorf("%s: mode %04o", d, fi.Mode().Perm())
		}
	})
}
