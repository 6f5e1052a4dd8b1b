package hostpath

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// tree makes dir/name files (empty) and returns dir, real (no links in it).
func tree(t *testing.T, names ...string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLocations: every link on the way to a file is a place whose change
// changes what the path names, the directory links included.
func TestLocations(t *testing.T) {
	dir := tree(t, "real/conf/kernel.yaml")
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o700)
	// ws/cfg -> ../real/conf (a directory link), ws/k.yaml -> cfg/kernel.yaml
	os.Symlink("../real/conf", filepath.Join(ws, "cfg"))
	os.Symlink("cfg/kernel.yaml", filepath.Join(ws, "k.yaml"))
	got := Locations(filepath.Join(ws, "k.yaml"))
	want := []string{filepath.Join(ws, "k.yaml"), filepath.Join(ws, "cfg"), filepath.Join(dir, "real", "conf", "kernel.yaml")}
	if !slices.Equal(got, want) {
		t.Fatalf("Locations = %q\nwant %q", got, want)
	}
	if r := Real(filepath.Join(ws, "cfg", "missing", "x")); r != filepath.Join(dir, "real", "conf", "missing", "x") {
		t.Errorf("Real of a missing tail = %s", r)
	}
	// A loop ends the walk without hanging.
	os.Symlink("loop", filepath.Join(ws, "loop"))
	if l := Locations(filepath.Join(ws, "loop")); len(l) == 0 {
		t.Error("no locations for a link loop")
	}
}

// TestWalker: a Walker's Locations are Locations (links, chains, a
// missing tail, a loop), and its Lstat answers from what it saw first: a
// place changed since is not asked about again.
func TestWalker(t *testing.T) {
	dir := tree(t, "real/conf/kernel.yaml", "real/other")
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o700)
	os.Symlink("../real/conf", filepath.Join(ws, "cfg"))
	os.Symlink("cfg/kernel.yaml", filepath.Join(ws, "k.yaml"))
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(ws, "abs"))
	os.Symlink("loop", filepath.Join(ws, "loop"))
	var w Walker
	for _, p := range []string{"ws/k.yaml", "ws/cfg/kernel.yaml", "ws/abs/other", "ws/cfg/missing/x", "ws/loop", "real", "ws/k.yaml"} {
		p = filepath.Join(dir, p)
		if got, want := w.Locations(p), Locations(p); !slices.Equal(got, want) {
			t.Errorf("Walker.Locations(%s) = %q, Locations %q", p, got, want)
		}
	}
	k := filepath.Join(ws, "k.yaml")
	fi, err := w.Lstat(k)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("Lstat(%s) = %v, %v: want the link", k, fi, err)
	}
	if err := os.Remove(k); err != nil {
		t.Fatal(err)
	}
	if fi2, err := w.Lstat(k); err != nil || fi2 != fi {
		t.Errorf("Lstat after the change = %v, %v: want the first answer", fi2, err)
	}
}

// TestFilesAndArgvFiles: the files a command line names, the link and its
// target for a link; directories, flags and missing paths are not files.
func TestFilesAndArgvFiles(t *testing.T) {
	dir := tree(t, "srv/node_modules/pkg/dist/index.js", "srv/hook.sh")
	bin := filepath.Join(dir, "srv", "node_modules", ".bin")
	os.Mkdir(bin, 0o700)
	os.Symlink("../pkg/dist/index.js", filepath.Join(bin, "pkg"))
	got := ArgvFiles([]string{"sh", "hook.sh", "--flag", "node_modules/.bin/pkg", "node_modules", "missing.js", ""}, filepath.Join(dir, "srv"))
	sh, _ := exec.LookPath("sh")
	want := append(Files([]string{sh}, ""), filepath.Join(dir, "srv", "hook.sh"), filepath.Join(bin, "pkg"), filepath.Join(dir, "srv", "node_modules", "pkg", "dist", "index.js"))
	if !slices.Equal(got, want) {
		t.Fatalf("ArgvFiles = %q\nwant %q", got, want)
	}
}

// TestPackageDir: npm's outermost node_modules (dependencies are hoisted
// there), a virtual environment's root, the nearest package marker; never
// the home directory or the root.
func TestPackageDir(t *testing.T) {
	dir := tree(t,
		"app/node_modules/a/node_modules/b/lib/x.js", "app/node_modules/a/package.json",
		"venv/pyvenv.cfg", "venv/lib/python3/site-packages/srv/main.py",
		"proj/pyproject.toml", "proj/src/srv.py",
		"home/u/loose.sh", "home/u/package.json")
	t.Setenv("HOME", filepath.Join(dir, "home", "u"))
	for file, want := range map[string]string{
		"app/node_modules/a/node_modules/b/lib/x.js": "app/node_modules",
		"venv/lib/python3/site-packages/srv/main.py": "venv",
		"proj/src/srv.py":  "proj",
		"home/u/loose.sh":  "",
		"home/nothing.txt": "",
	} {
		if want != "" {
			want = filepath.Join(dir, want)
		}
		if got := PackageDir(filepath.Join(dir, file)); got != want {
			t.Errorf("PackageDir(%s) = %q, want %q", file, got, want)
		}
	}
}

func TestWithin(t *testing.T) {
	dirs := []string{"/a/b", "/c"}
	for p, want := range map[string]bool{"/a/b": true, "/a/b/c": true, "/a/bc": false, "/c/d/e": true, "/": false} {
		if Within(p, dirs) != want {
			t.Errorf("Within(%s) = %v", p, !want)
		}
	}
}
