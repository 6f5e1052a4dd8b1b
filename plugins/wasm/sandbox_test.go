package wasm

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
)

const secret = "TOP SECRET"

// escapeTree builds a host directory tree for escape attempts:
//
//	outside/secret.txt            what no guest may read or change
//	mount/                        mounted at /data (rw)
//	  file.txt
//	  sub/nested.txt
//	  inner -> file.txt           a symlink that stays inside
//	  rel_escape -> ../outside/secret.txt
//	  abs_escape -> <abs>/outside/secret.txt
//	  dir_escape -> ../outside
//	  fifo                        a named pipe nobody writes to
//	ro/data.txt                   mounted at /ro (ro)
func escapeTree(t testing.TB) (root, mount, ro string) {
	t.Helper()
	root = t.TempDir()
	mount = filepath.Join(root, "mount")
	ro = filepath.Join(root, "ro")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{mount, filepath.Join(mount, "sub"), ro, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(outside, "secret.txt"):      secret,
		filepath.Join(mount, "file.txt"):          "inside",
		filepath.Join(mount, "sub", "nested.txt"): "nested",
		filepath.Join(ro, "data.txt"):             "read only",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"inner":      "file.txt",
		"rel_escape": "../outside/secret.txt",
		"abs_escape": filepath.Join(outside, "secret.txt"),
		"dir_escape": "../outside",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(mount, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(mount, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, mount, ro
}

func openRoot(t testing.TB, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func readAll(t testing.TB, fs experimentalsys.FS, p string) (string, experimentalsys.Errno) {
	t.Helper()
	f, en := fs.OpenFile(p, experimentalsys.O_RDONLY, 0)
	if en != 0 {
		return "", en
	}
	defer f.Close()
	var out []byte
	buf := make([]byte, 64)
	for {
		n, en := f.Read(buf)
		out = append(out, buf[:n]...)
		if en != 0 {
			return string(out), en
		}
		if n == 0 {
			return string(out), 0
		}
	}
}

// TestWazeroDirFSEscapes is the control: wazero's own directory mount
// follows a relative symlink out of the mount (wazero #2321/#2322). If
// this ever fails, wazero fixed it; the sandbox does not depend on it.
func TestWazeroDirFSEscapes(t *testing.T) {
	_, mount, _ := escapeTree(t)
	got, en := readAll(t, sysfs.DirFS(mount), "rel_escape")
	if en != 0 || got != secret {
		t.Skipf("wazero's DirFS no longer follows the escaping symlink (%q, %v)", got, en)
	}
}

// TestRootFSEscapes drives the sandbox file system directly with the paths
// a guest's WASI calls can carry: every escape fails, nothing outside
// changes, and ordinary use works.
func TestRootFSEscapes(t *testing.T) {
	root, mount, roDir := escapeTree(t)
	rw := newRootFS(openRoot(t, mount), false)
	ro := newRootFS(openRoot(t, roDir), true)

	for _, p := range []string{
		"../outside/secret.txt", "sub/../../outside/secret.txt", "/../outside/secret.txt",
		"rel_escape", "abs_escape", "dir_escape/secret.txt", "sub/../rel_escape",
	} {
		t.Run("read "+p, func(t *testing.T) {
			if got, en := readAll(t, rw, p); en == 0 || strings.Contains(got, secret) {
				t.Fatalf("read %q: %q, errno %v; want an error", p, got, en)
			}
		})
	}
	t.Run("absolute path stays inside", func(t *testing.T) {
		// wazero hands the FS mount-relative paths; a leading slash is
		// the mount's root, never the host's.
		if _, en := readAll(t, rw, filepath.Join(root, "outside", "secret.txt")); en != experimentalsys.ENOENT {
			t.Fatalf("errno %v, want ENOENT", en)
		}
	})
	t.Run("symlink inside the mount works", func(t *testing.T) {
		if got, en := readAll(t, rw, "inner"); en != 0 || got != "inside" {
			t.Fatalf("%q, %v", got, en)
		}
	})
	t.Run("fifo is refused without blocking", func(t *testing.T) {
		if _, en := rw.OpenFile("fifo", experimentalsys.O_RDONLY, 0); en != experimentalsys.EACCES {
			t.Fatalf("errno %v, want EACCES", en)
		}
	})
	t.Run("write through an escaping symlink", func(t *testing.T) {
		if f, en := rw.OpenFile("rel_escape", experimentalsys.O_WRONLY|experimentalsys.O_TRUNC, 0); en == 0 {
			f.Close()
			t.Fatal("opened the outside file for writing")
		}
	})
	t.Run("create symlinks that leave", func(t *testing.T) {
		for _, target := range []string{"../outside/secret.txt", "/etc/passwd", filepath.Join(root, "outside"), "sub/../../x", ".."} {
			if en := rw.Symlink(target, "new_link"); en != experimentalsys.EPERM {
				t.Errorf("symlink -> %q: errno %v, want EPERM", target, en)
			}
		}
		if en := rw.Symlink("sub/nested.txt", "down"); en != 0 {
			t.Fatalf("a downward symlink: %v", en)
		}
		if got, _ := readAll(t, rw, "down"); got != "nested" {
			t.Fatalf("read through it: %q", got)
		}
	})
	t.Run("hard links", func(t *testing.T) {
		if en := rw.Link("../outside/secret.txt", "hard"); en == 0 {
			t.Fatal("hard-linked a file from outside")
		}
		// Linking the escaping symlink itself yields another symlink,
		// which is confined like the first.
		if en := rw.Link("rel_escape", "hard2"); en == 0 {
			if got, en := readAll(t, rw, "hard2"); en == 0 || strings.Contains(got, secret) {
				t.Fatalf("read through a linked symlink: %q", got)
			}
		}
	})
	t.Run("renames", func(t *testing.T) {
		if en := rw.Rename("file.txt", "../outside/moved.txt"); en == 0 {
			t.Fatal("renamed a file out of the mount")
		}
		if en := rw.Rename("../outside/secret.txt", "stolen.txt"); en == 0 {
			t.Fatal("renamed a file into the mount")
		}
		// Moving an escaping link would plant it for host programs
		// (TestNoTrapsForHostPrograms); reading through it fails anyway.
		if en := rw.Rename("dir_escape", "renamed_escape"); en != experimentalsys.EPERM {
			t.Fatalf("renaming an escaping link: %v, want EPERM", en)
		}
		if got, en := readAll(t, rw, "dir_escape/secret.txt"); en == 0 || strings.Contains(got, secret) {
			t.Fatalf("read through the escaping link: %q", got)
		}
	})
	t.Run("read-only mount refuses every write", func(t *testing.T) {
		writes := map[string]experimentalsys.Errno{}
		if f, en := ro.OpenFile("data.txt", experimentalsys.O_RDWR, 0); en == 0 {
			f.Close()
			writes["open rw"] = 0
		}
		if f, en := ro.OpenFile("new.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644); en == 0 {
			f.Close()
			writes["create"] = 0
		}
		for op, en := range map[string]experimentalsys.Errno{
			"mkdir":   ro.Mkdir("d", 0o755),
			"unlink":  ro.Unlink("data.txt"),
			"rename":  ro.Rename("data.txt", "x.txt"),
			"chmod":   ro.Chmod("data.txt", 0o777),
			"symlink": ro.Symlink("data.txt", "l"),
			"link":    ro.Link("data.txt", "l2"),
			"utimens": ro.Utimens("data.txt", 0, 0),
		} {
			if en != experimentalsys.EROFS {
				writes[op] = en
			}
		}
		f, en := ro.OpenFile("data.txt", experimentalsys.O_RDONLY, 0)
		if en != 0 {
			t.Fatal(en)
		}
		if _, en := f.Write([]byte("x")); en != experimentalsys.EROFS {
			writes["write"] = en
		}
		if en := f.Truncate(0); en != experimentalsys.EROFS {
			writes["truncate"] = en
		}
		if en := f.SetAppend(true); en != experimentalsys.EROFS {
			writes["append"] = en
		}
		f.Close()
		if len(writes) > 0 {
			t.Fatalf("writes to the ro mount not refused with EROFS: %v", writes)
		}
		if b, _ := os.ReadFile(filepath.Join(roDir, "data.txt")); string(b) != "read only" {
			t.Fatalf("data.txt changed to %q", b)
		}
	})
	if b, err := os.ReadFile(filepath.Join(root, "outside", "secret.txt")); err != nil || string(b) != secret {
		t.Fatalf("outside/secret.txt changed: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "outside")); len(ents) != 1 {
		t.Fatalf("outside/ has %d entries, want only secret.txt", len(ents))
	}
}

// TestRootFSFileOps checks the rootFile plumbing wazero relies on: reads,
// positioned I/O, directory listing and rewind, append, stat.
func TestRootFSFileOps(t *testing.T) {
	_, mount, _ := escapeTree(t)
	rw := newRootFS(openRoot(t, mount), false)
	f, en := rw.OpenFile("new.txt", experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC, 0o644)
	if en != 0 {
		t.Fatal(en)
	}
	if _, en := f.Write([]byte("hello world")); en != 0 {
		t.Fatal(en)
	}
	buf := make([]byte, 5)
	if n, en := f.Pread(buf, 6); en != 0 || string(buf[:n]) != "world" {
		t.Fatalf("pread: %q %v", buf[:n], en)
	}
	if _, en := f.Pwrite([]byte("W"), 6); en != 0 {
		t.Fatal(en)
	}
	if off, en := f.Seek(0, io.SeekStart); en != 0 || off != 0 {
		t.Fatal(off, en)
	}
	if en := f.SetAppend(true); en != 0 || !f.IsAppend() {
		t.Fatal("set append", en)
	}
	if _, en := f.Write([]byte("!")); en != 0 {
		t.Fatal(en)
	}
	if st, en := f.Stat(); en != 0 || st.Size != 12 {
		t.Fatalf("stat size %d, %v", st.Size, en)
	}
	f.Close()
	if b, _ := os.ReadFile(filepath.Join(mount, "new.txt")); string(b) != "hello World!" {
		t.Fatalf("file is %q", b)
	}

	d, en := rw.OpenFile(".", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if en != 0 {
		t.Fatal(en)
	}
	defer d.Close()
	first, en := d.Readdir(-1)
	if en != 0 || len(first) < 5 {
		t.Fatalf("readdir: %d entries, %v", len(first), en)
	}
	if _, en := d.Seek(0, io.SeekStart); en != 0 {
		t.Fatal("rewind", en)
	}
	again, _ := d.Readdir(-1)
	if len(again) != len(first) {
		t.Fatalf("after rewind %d entries, before %d", len(again), len(first))
	}
	if _, en := d.Read(buf); en != experimentalsys.EISDIR {
		t.Fatalf("read on a directory: %v", en)
	}
}
