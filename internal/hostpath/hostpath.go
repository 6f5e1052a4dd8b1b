// Package hostpath answers the questions the kernel asks about host paths
// it trusts: where a path really leads (and through which symbolic links),
// which files a command line names, and which package directory a script
// belongs to. The kernel's own files (configuration, policy, hook scripts,
// the scripts of MCP servers) are protected by these answers: a file is
// only as safe as every link on the way to it.
package hostpath

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// maxLinkHops bounds the symbolic links one path may go through, as the
// kernel's own lookups do (40, Linux's MAXSYMLINKS).
const maxLinkHops = 40

// Real is p made absolute with every symbolic link resolved as far as the
// path exists; the missing tail is kept as written.
func Real(p string) string {
	locs := Locations(p)
	return locs[len(locs)-1]
}

// Locations returns every place whose change changes what p names: the
// real location of each symbolic link met while resolving p (its real
// parent directory joined with its name), in the order met, then p's own
// real path (last). A link that cannot be read, or too many links, ends the
// walk there with the path as far as it got. p is made absolute first.
func Locations(p string) []string { return locations(p, os.Lstat) }

// A Walker answers Locations and Lstat remembering every Lstat it made:
// the paths one caller resolves at one moment share their parents (the
// sandbox launcher's view plan resolves some forty granted paths under
// /usr and /etc at every start). Its answers are what the file system
// held when each place was first asked about; a caller that acts on them
// later must check again (the launcher builds its view with no link
// followed). The zero Walker is ready; not for concurrent use.
type Walker struct {
	seen map[string]walkStat
}

type walkStat struct {
	fi  fs.FileInfo
	err error
}

// Lstat is os.Lstat, once per path.
func (w *Walker) Lstat(p string) (fs.FileInfo, error) {
	if st, ok := w.seen[p]; ok {
		return st.fi, st.err
	}
	fi, err := os.Lstat(p)
	if w.seen == nil {
		w.seen = map[string]walkStat{}
	}
	w.seen[p] = walkStat{fi, err}
	return fi, err
}

// Locations is Locations through w's Lstat.
func (w *Walker) Locations(p string) []string { return locations(p, w.Lstat) }

func locations(p string, lstat func(string) (fs.FileInfo, error)) []string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return []string{filepath.Clean(p)}
	}
	var out []string
	rest := split(abs)
	cur := string(filepath.Separator)
	hops := 0
	for len(rest) > 0 {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, comp)
		fi, err := lstat(next)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			if err != nil {
				// Missing (or unreadable): the rest is taken as written.
				return append(out, filepath.Join(append([]string{next}, rest...)...))
			}
			cur = next
			continue
		}
		out = append(out, next)
		target, err := os.Readlink(next)
		if hops++; err != nil || hops > maxLinkHops {
			return append(out, filepath.Join(append([]string{next}, rest...)...))
		}
		if filepath.IsAbs(target) {
			cur = string(filepath.Separator)
		}
		rest = append(split(target), rest...)
	}
	return append(out, cur)
}

func split(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}

// ArgvFiles returns the existing files a command line names, absolute and
// without duplicates: argv[0] as the system finds it (a bare name in
// $PATH, else relative to dir), and every further element that names an
// existing file relative to dir (or absolute), as Files does.
//
// This is what the kernel protects and lets a confined server read: the
// interpreter's script in [node, server.js] or [sh, hook.sh] is as much the
// program as the interpreter is.
func ArgvFiles(argv []string, dir string) []string {
	if len(argv) == 0 {
		return nil
	}
	prog := argv[0]
	if prog != "" && !strings.ContainsRune(prog, '/') && !strings.ContainsRune(prog, filepath.Separator) {
		found, err := exec.LookPath(prog)
		if err != nil {
			found = ""
		}
		prog = found
	}
	return Files(append([]string{prog}, argv[1:]...), dir)
}

// Files returns the elements of args that name existing regular files,
// absolute (relative ones joined to dir; dir empty means the working
// directory) and without duplicates. For a symbolic link (npm's
// node_modules/.bin/NAME) both the link and the file it leads to are
// returned. Directories, missing paths and empty elements are left out.
func Files(args []string, dir string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, a := range args {
		if a == "" || strings.ContainsRune(a, 0) {
			continue
		}
		p := a
		if !filepath.IsAbs(p) {
			base := dir
			if base == "" {
				base, _ = os.Getwd()
			}
			p = filepath.Join(base, p)
		}
		p, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		lfi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if lfi.Mode()&fs.ModeSymlink == 0 {
			if lfi.Mode().IsRegular() {
				add(p)
			}
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			add(p)
			add(Real(p))
		}
	}
	return out
}

// packageMarkers are the files that make a directory a package's root:
// npm's and Python's.
var packageMarkers = []string{"package.json", "pyproject.toml", "setup.py", "setup.cfg"}

// PackageDir returns the directory a script needs to run from, besides
// itself: for a file inside a node_modules tree, the outermost node_modules
// directory (npm hoists a package's dependencies there); inside a Python
// virtual environment, the environment's root (the directory holding
// pyvenv.cfg); otherwise the nearest directory above the file that holds a
// package.json, pyproject.toml, setup.py or setup.cfg. The search stops
// below the user's home directory and the file system root, which are never
// a package directory: "" then, and for a file that belongs to no package.
// file should be a real path (Real).
func PackageDir(file string) string {
	home, _ := os.UserHomeDir()
	stop := func(d string) bool {
		return d == filepath.Dir(d) || (home != "" && filepath.Clean(home) == d)
	}
	for d := filepath.Dir(file); !stop(d); d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			outer := d
			for p := filepath.Dir(d); !stop(p); p = filepath.Dir(p) {
				if filepath.Base(p) == "node_modules" {
					outer = p
				}
			}
			return outer
		}
	}
	for d := filepath.Dir(file); !stop(d); d = filepath.Dir(d) {
		if exists(filepath.Join(d, "pyvenv.cfg")) {
			return d
		}
	}
	for d := filepath.Dir(file); !stop(d); d = filepath.Dir(d) {
		for _, m := range packageMarkers {
			if exists(filepath.Join(d, m)) {
				return d
			}
		}
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

// ReadPaths are the paths a program run from files must be able to read:
// each file, and the package directory (PackageDir) of each file's real
// path, without duplicates and without a path that lies inside another
// of them.
func ReadPaths(files []string) []string {
	var all []string
	seen := map[string]bool{}
	for _, f := range files {
		for _, p := range []string{f, PackageDir(Real(f))} {
			if p != "" && !seen[p] {
				seen[p] = true
				all = append(all, p)
			}
		}
	}
	var out []string
	for i, p := range all {
		inside := false
		for j, q := range all {
			inside = inside || (i != j && Within(p, []string{q}))
		}
		if !inside {
			out = append(out, p)
		}
	}
	return out
}

// Within reports whether p is one of dirs or below one of them, lexically
// (all absolute and clean).
func Within(p string, dirs []string) bool {
	for _, d := range dirs {
		if rel, err := filepath.Rel(d, p); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return true
		}
	}
	return false
}
