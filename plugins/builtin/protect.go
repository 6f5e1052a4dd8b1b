package builtin

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/agentkernel/agentkernel/internal/hostpath"
)

// The write tools (write_file, edit_file) refuse two kinds of target,
// wherever the model's path leads (resolve: through os.Root, links
// followed inside it):
//
//   - the kernel's own files (Config.Protected): configuration, policy,
//     hook and server scripts, the store...;
//   - .git, the repository's control plane: a planted core.fsmonitor or
//     hook runs as the operator on their next git command. Unless the
//     operator granted <root>/.git read-write to commands
//     (Config.CommandSandbox), any path component that is, or that the file
//     system could take for, ".git" is refused.
//
// Names are compared folded (case, Unicode normalisation, the code points
// HFS+ ignores, NTFS's trailing dots and spaces and its "GIT~1" short
// name), so a case-insensitive or normalising file system cannot alias a
// protected name; and existing targets and their directories are compared
// by identity (os.SameFile), so a hard link or an alias the names miss is
// caught too. RATIONALE.md, "The write tools compare names folded and files
// by identity".

// protectedInside returns the protected paths that lie inside dir, real and
// relative to it (slash-separated): for each path, every place whose change
// changes what it names (hostpath.Locations: the links on the way, and the
// real path).
func protectedInside(dir string, protected []string) []string {
	realDir := hostpath.Real(dir)
	var out []string
	for _, p := range protected {
		for _, loc := range hostpath.Locations(p) {
			rel, err := filepath.Rel(realDir, loc)
			if err == nil && filepath.IsLocal(rel) {
				out = append(out, filepath.ToSlash(rel))
			}
		}
	}
	return out
}

// RealPath is the host path p with symbolic links resolved as far as it
// exists (the missing tail is kept as written).
func RealPath(p string) string { return hostpath.Real(p) }

// gitGranted reports whether cfg grants <root>/.git read-write to
// commands: then the write tools may change it too.
func gitGranted(root string, cfg Config) bool {
	gitDir := filepath.Join(root, ".git")
	for _, r := range cfg.CommandSandbox.FS {
		if r.Writable() && filepath.Clean(r.Path) == gitDir {
			return true
		}
	}
	return false
}

// protectedFile is a file the write tools compare targets against by
// identity.
type protectedFile struct {
	name string
	fi   fs.FileInfo
}

// protectedFiles are the protected files and .git as they are now (each
// link and what it leads to): a write whose target, or a directory on its
// way, is one of them is refused.
func (w *workspace) protectedFiles() []protectedFile {
	var out []protectedFile
	add := func(name string, fi fs.FileInfo, err error) {
		if err == nil {
			out = append(out, protectedFile{name: name, fi: fi})
		}
	}
	for _, p := range w.protectedHost {
		fi, err := os.Lstat(p)
		add(p, fi, err)
		fi, err = os.Stat(p)
		add(p, fi, err)
	}
	if !w.gitWritable {
		fi, err := w.root.Lstat(".git")
		add(".git", fi, err)
		fi, err = w.root.Stat(".git")
		add(".git", fi, err)
	}
	return out
}

// refuseProtected fails a write whose real target is one of the kernel's
// own files or inside one of its directories, or is in .git (unless
// granted): by name, folded, and by identity for what exists.
func (w *workspace) refuseProtected(verb, p string) error {
	real, ok := w.resolve(p)
	if !ok {
		return nil // the write itself refuses a path that leaves the root
	}
	if !w.gitWritable {
		for _, comp := range strings.Split(real, "/") {
			if isDotGit(comp) {
				return w.gitRefusal(verb, p)
			}
		}
	}
	folded := foldPath(real)
	for _, q := range w.protected {
		fq := foldPath(q)
		if folded == fq || strings.HasPrefix(folded, fq+"/") {
			return kernelFileRefusal(verb, p, q)
		}
	}
	files := w.protectedFiles()
	for at := real; at != "." && at != "/" && at != ""; at = path.Dir(at) {
		fi, err := w.root.Lstat(at)
		if err != nil {
			continue
		}
		if err := w.sameAsProtected(verb, p, fi, files); err != nil {
			return err
		}
	}
	return nil
}

// sameAsProtected fails when fi is one of files.
func (w *workspace) sameAsProtected(verb, p string, fi fs.FileInfo, files []protectedFile) error {
	for _, f := range files {
		if os.SameFile(fi, f.fi) {
			if f.name == ".git" {
				return w.gitRefusal(verb, p)
			}
			return kernelFileRefusal(verb, p, f.name)
		}
	}
	return nil
}

// checkOpened refuses an opened write target that is a protected file (a
// hard link to one, or a name the path checks did not see), or another
// name of a file in .git.
func (w *workspace) checkOpened(verb, p string, fi fs.FileInfo) error {
	if err := w.sameAsProtected(verb, p, fi, w.protectedFiles()); err != nil {
		return err
	}
	if !w.gitWritable && linkCount(fi) > 1 && w.inGit(fi) {
		return w.gitRefusal(verb, p)
	}
	return nil
}

// gitWalkMax bounds the entries inGit looks at.
const gitWalkMax = 20000

// inGit reports whether fi is a file of .git under another name (a hard
// link): the repository's configuration, hooks and submodules' files, not
// its object store. A .git too large to look through counts as a yes.
func (w *workspace) inGit(fi fs.FileInfo) bool {
	found, seen := false, 0
	_ = fs.WalkDir(w.root.FS(), ".git", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if seen++; seen > gitWalkMax {
			found = true
			return fs.SkipAll
		}
		if d.IsDir() && d.Name() == "objects" {
			return fs.SkipDir
		}
		if d.Type().IsRegular() {
			if gi, err := d.Info(); err == nil && os.SameFile(fi, gi) {
				found = true
				return fs.SkipAll
			}
		}
		return nil
	})
	return found
}

func kernelFileRefusal(verb, p, q string) error {
	return fmt.Errorf("%s %q: it is one of the kernel's own files (%s); tools may never change it", verb, p, q)
}

func (w *workspace) gitRefusal(verb, p string) error {
	return fmt.Errorf("%s %q: .git is the repository's control plane (its config and hooks run as the operator on their next git command), so write_file and edit_file never change it; "+
		"the operator can allow it by granting commands %s read-write (tools.builtin.command_sandbox: {fs: [{path: %s, mode: rw}]})",
		verb, p, filepath.Join(w.dir, ".git"), filepath.Join(w.dir, ".git"))
}

// isDotGit reports whether a file system could take the name for ".git":
// case-insensitive, normalising (HFS+ ignores some code points) or NTFS
// (trailing dots and spaces, the 8.3 name GIT~1). Git refuses the same
// names in trees (is_hfs_dotgit, is_ntfs_dotgit).
func isDotGit(name string) bool {
	f := foldName(name)
	return f == ".git" || f == "git~1"
}

// foldName is name as a case-insensitive, normalising file system may see
// it: NFC, without the code points HFS+ ignores, lower case, without
// trailing dots and spaces.
func foldName(name string) string {
	name = strings.Map(func(r rune) rune {
		if hfsIgnored(r) {
			return -1
		}
		return r
	}, norm.NFC.String(name))
	return strings.TrimRight(strings.ToLower(name), ". ")
}

// foldPath folds every component of a slash-separated path.
func foldPath(p string) string {
	parts := strings.Split(p, "/")
	for i, c := range parts {
		parts[i] = foldName(c)
	}
	return strings.Join(parts, "/")
}

// hfsIgnored reports the code points HFS+ drops from names (git's
// next_hfs_char): zero-width joiners and directional marks, the
// deprecated format characters and the byte order mark.
func hfsIgnored(r rune) bool {
	return (r >= 0x200c && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x206a && r <= 0x206f) || r == 0xfeff
}
