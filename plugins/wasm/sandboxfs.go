package wasm

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// rootFS is a guest file system confined to one host directory. Every path
// is resolved by os.Root, which walks the path one component at a time with
// openat and refuses anything that would leave the directory: "..", absolute
// paths and symlinks (relative or absolute) that point outside, and
// symlinks swapped in during the walk. wazero's own directory mounts resolve
// paths with plain string joins and can be escaped (wazero #2321, #2322);
// this type replaces them.
//
// On top of that:
//   - a read-only mount refuses every write with EROFS;
//   - only regular files and directories can be opened (no FIFOs, devices or
//     sockets, whose open or read can block past the call's deadline), and
//     every open is non-blocking;
//   - a new symlink may only point down (relative, no ".."), so the guest
//     cannot leave a link behind for a host program that does not confine
//     paths;
//   - hard links and renames are os.Root operations, both ends inside.
//
// rootFS is safe for concurrent use; its files are not.
type rootFS struct {
	experimentalsys.UnimplementedFS
	root     *os.Root
	readOnly bool
}

func newRootFS(root *os.Root, readOnly bool) *rootFS {
	return &rootFS{root: root, readOnly: readOnly}
}

// String is what wazero prints for the mount.
func (r *rootFS) String() string { return r.root.Name() }

// name turns a guest path (already cleaned by wazero, relative to the
// mount) into an os.Root name. The mount itself is ".".
func name(p string) string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return "."
	}
	return p
}

// errno maps an error from os.Root to a WASI errno. Errors without an errno
// (os.Root's "path escapes from parent") become EPERM: deny by default.
func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return experimentalsys.UnwrapOSError(en)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return experimentalsys.ENOENT
	case errors.Is(err, fs.ErrExist):
		return experimentalsys.EEXIST
	case errors.Is(err, fs.ErrClosed):
		return experimentalsys.EBADF
	case errors.Is(err, fs.ErrInvalid):
		return experimentalsys.EINVAL
	}
	return experimentalsys.EPERM
}

const writeFlags = experimentalsys.O_WRONLY | experimentalsys.O_RDWR | experimentalsys.O_APPEND |
	experimentalsys.O_CREAT | experimentalsys.O_TRUNC

// OpenFile implements experimentalsys.FS.
func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if r.readOnly && flag&writeFlags != 0 {
		return nil, experimentalsys.EROFS
	}
	var of int
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		of = os.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		of = os.O_WRONLY
	default:
		of = os.O_RDONLY
	}
	for _, m := range []struct {
		w experimentalsys.Oflag
		o int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND},
		{experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL},
		{experimentalsys.O_TRUNC, os.O_TRUNC},
		{experimentalsys.O_SYNC, os.O_SYNC},
		{experimentalsys.O_DSYNC, oDSYNC},
		{experimentalsys.O_DIRECTORY, syscall.O_DIRECTORY},
		{experimentalsys.O_NOFOLLOW, syscall.O_NOFOLLOW},
	} {
		if flag&m.w != 0 {
			of |= m.o
		}
	}
	// Non-blocking open: a FIFO without a writer must not hang the host.
	of |= syscall.O_NONBLOCK | syscall.O_NOCTTY
	f, err := r.root.OpenFile(name(p), of, perm.Perm())
	if err != nil {
		return nil, errno(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, errno(err)
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		f.Close()
		return nil, experimentalsys.EACCES
	}
	return &rootFile{f: f, name: name(p), fs: r, isDir: st.IsDir(), flag: flag}, 0
}

// Lstat implements experimentalsys.FS.
func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	st, err := r.root.Lstat(name(p))
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(st), 0
}

// Stat implements experimentalsys.FS.
func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	st, err := r.root.Stat(name(p))
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(st), 0
}

// Readlink implements experimentalsys.FS. Reading where a link points is
// not following it.
func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	dst, err := r.root.Readlink(name(p))
	if err != nil {
		return "", errno(err)
	}
	return dst, 0
}

// Mkdir implements experimentalsys.FS.
func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	return errno(r.root.Mkdir(name(p), perm.Perm()))
}

// Chmod implements experimentalsys.FS.
func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	return errno(r.root.Chmod(name(p), perm.Perm()))
}

// Rename implements experimentalsys.FS. Both names are inside the mount.
// A symlink is moved only if its target stays inside the mount (see
// safeTarget): moving an escaping link that the operator or a host tool
// left there would plant it where host programs do not expect it.
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	if e := r.refuseEscapingLink(name(from)); e != 0 {
		return e
	}
	return errno(r.root.Rename(name(from), name(to)))
}

// refuseEscapingLink returns EPERM when p is a symlink whose target could
// resolve outside the mount from the host's point of view.
func (r *rootFS) refuseEscapingLink(p string) experimentalsys.Errno {
	st, err := r.root.Lstat(p)
	if err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return 0
	}
	target, err := r.root.Readlink(p)
	if err != nil {
		return errno(err)
	}
	return r.safeTarget(path.Dir(p), target)
}

// safeTarget returns 0 if a symlink in directory dir (a name inside the
// root) pointing at target resolves inside the mount for anyone, the host
// included: target is relative, has no ".." element, and does not pass
// through an existing symlink (which could lead anywhere). Otherwise EPERM.
func (r *rootFS) safeTarget(dir, target string) experimentalsys.Errno {
	if target == "" || path.IsAbs(target) || strings.Contains(target, "\\") {
		return experimentalsys.EPERM
	}
	p := dir
	for _, elem := range strings.Split(target, "/") {
		if elem == ".." {
			return experimentalsys.EPERM
		}
		if elem == "" || elem == "." {
			continue
		}
		p = path.Join(p, elem)
		st, err := r.root.Lstat(p)
		if err != nil {
			break // nothing there (yet): nothing to pass through
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return experimentalsys.EPERM
		}
	}
	return 0
}

// Rmdir implements experimentalsys.FS.
func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	st, err := r.root.Lstat(name(p))
	if err != nil {
		return errno(err)
	}
	if !st.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return errno(r.root.Remove(name(p)))
}

// Unlink implements experimentalsys.FS.
func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	st, err := r.root.Lstat(name(p))
	if err != nil {
		return errno(err)
	}
	if st.IsDir() {
		return experimentalsys.EISDIR
	}
	return errno(r.root.Remove(name(p)))
}

// Link implements experimentalsys.FS: a hard link from a file inside the
// mount to a new name inside the mount.
func (r *rootFS) Link(oldPath, newPath string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	// A hard link to a symlink is a copy of the symlink: refuse copying
	// one that leaves the mount.
	if e := r.refuseEscapingLink(name(oldPath)); e != 0 {
		return e
	}
	return errno(r.root.Link(name(oldPath), name(newPath)))
}

// Symlink implements experimentalsys.FS. A target that is absolute, has a
// ".." element or passes through an existing symlink is refused with
// EPERM (see safeTarget): following such a link inside the sandbox would
// fail anyway, but outside it (a host program that does not confine
// paths) it could lead anywhere. Links made of downward names through
// real directories only resolve inside the mount, even through each other.
func (r *rootFS) Symlink(target, link string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	if e := r.safeTarget(path.Dir(name(link)), target); e != 0 {
		return e
	}
	return errno(r.root.Symlink(target, name(link)))
}

// Utimens implements experimentalsys.FS.
func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		return 0
	}
	if atim == experimentalsys.UTIME_OMIT || mtim == experimentalsys.UTIME_OMIT {
		st, err := r.root.Stat(name(p))
		if err != nil {
			return errno(err)
		}
		cur := sys.NewStat_t(st)
		if atim == experimentalsys.UTIME_OMIT {
			atim = cur.Atim
		}
		if mtim == experimentalsys.UTIME_OMIT {
			mtim = cur.Mtim
		}
	}
	return errno(r.root.Chtimes(name(p), time.Unix(0, atim), time.Unix(0, mtim)))
}

var _ experimentalsys.FS = (*rootFS)(nil)
