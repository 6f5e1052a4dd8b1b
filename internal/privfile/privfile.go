// Package privfile owns the kernel's private files and directories: the
// session store's directory, the API key file, the steering queue, the
// caches (compiled WASM, policy verdicts, MCP and plugin tool lists), the
// plugin host's private copies and the files the CLI writes (events,
// exports, the decision log). Every check of mode and owner and every
// no-follow open of those files is here, so that they all behave alike.
//
// One rule decides between refusing and repairing (RATIONALE.md, "One
// owner for private files"):
//
//   - What another user could have written is refused: a file or
//     directory owned by another user, or one that group or others may
//     write (mode & 022). Narrowing the mode afterwards would not undo
//     what was planted, so the caller gets an error (ErrNotPrivate) naming
//     the path and the fix, and a cache treats the entry as missing.
//   - What others could only have read is repaired: a directory or file of
//     ours that group or others may read or enter but not write is
//     narrowed to 0700/0600, and the warning says so (what it held may
//     have been read: rotate what was secret).
//   - What a library creates inside a private directory of ours (Badger's
//     files, 0644 under the umask) is narrowed quietly by NarrowTree: the
//     directory kept it private, nothing leaked.
//   - A symbolic link where a file is read or written is refused
//     (O_NOFOLLOW), its target untouched. A directory may be a link: its
//     target is checked like any directory (owner and mode), so a link
//     planted to another user's directory is refused.
//   - What the kernel creates is created private: directories 0700, files
//     0600, whatever the umask; replaced files are written beside their
//     name and renamed over it, so a link planted in their place is
//     replaced, never written through.
//
// The functions are safe for concurrent use; they hold no state.
package privfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotPrivate is matched by the error of a file or directory another
// user could have written: owned by someone else, or writable by group or
// others.
var ErrNotPrivate = errors.New("not private to this user")

// ErrLink is matched by the error of a file the kernel refuses to read or
// write because it is a symbolic link (or, for writes, a hard link to
// another name).
var ErrLink = errors.New("the kernel never reads or writes its files through a link")

// Warn receives the message of a repair (a mode narrowed). A nil Warn
// discards it.
type Warn func(msg string)

func (w Warn) say(format string, args ...any) {
	if w != nil {
		w(fmt.Sprintf(format, args...))
	}
}

// Dir makes dir a directory only this user can use, creating it (and
// missing parents) 0700 when it does not exist. An existing one is checked
// (through a symbolic link, if dir is one): another user's, or one group
// or others may write, is refused with ErrNotPrivate; one they may only
// read or enter is narrowed to 0700, and warn says so. what names the
// directory in messages ("the WASM compilation cache").
func Dir(dir, what string, warn Warn) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s %s: %w", what, dir, err)
		}
		// MkdirAll's mode passes through the umask, which may take the
		// owner's own bits (never add others'); a racing creator that was
		// first is checked below like any existing directory.
		fi, err = os.Stat(dir)
		if err == nil && fi.IsDir() && fi.Mode().Perm()&0o077 == 0 && fi.Mode().Perm() != 0o700 && owner(fi) == os.Geteuid() {
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("create %s %s: %w", what, dir, err)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory (%s)", what, dir, fi.Mode().Type())
	}
	if err := checkOwner(fi, dir, what, "directory"); err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return fmt.Errorf("%s %s has mode %04o: other users could have put files in it, which the kernel would trust; check what it holds, then run chmod 700 %s (or choose another directory): %w", what, dir, perm, dir, ErrNotPrivate)
	}
	if perm&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("%s %s has mode %04o, open to other users, and narrowing it to 0700 failed: %w; run chmod 700 %s", what, dir, perm, err, dir)
		}
		warn.say("%s %s had mode %04o (other users could read what is in it); narrowed to 0700", what, dir, perm)
	}
	return nil
}

// Parent checks the directory that holds a private file the operator named
// (the API key file, say), creating it 0700 when missing. The file keeps
// its own mode, so the directory may be readable; it is refused when
// someone else could replace the file in it: when group or others may
// write it without the sticky bit (/tmp's 1777 keeps others' hands off our
// names), or when a user other than this one and root owns it.
func Parent(file, what string) error {
	dir := filepath.Dir(file)
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Dir(dir, what, nil)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory (%s)", what, dir, fi.Mode().Type())
	}
	if uid := owner(fi); uid > 0 && uid != os.Geteuid() {
		return fmt.Errorf("%s %s belongs to uid %d: its owner could replace %s; choose another directory: %w", what, dir, uid, filepath.Base(file), ErrNotPrivate)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s %s has mode %04o: other users could replace %s in it; run chmod go-w %s (or choose another directory): %w", what, dir, perm, filepath.Base(file), dir, ErrNotPrivate)
	}
	return nil
}

// TempDir creates a new directory under parent (os.TempDir() when empty)
// whose name starts with prefix, mode 0700, and returns its absolute path.
func TempDir(parent, prefix string) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	d, err := os.MkdirTemp(parent, prefix+"*")
	if err != nil {
		return "", err
	}
	// MkdirTemp creates 0700 minus the umask.
	if err := os.Chmod(d, 0o700); err != nil {
		os.RemoveAll(d)
		return "", err
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		os.RemoveAll(d)
		return "", err
	}
	return abs, nil
}

// Open opens a private file for reading: never through a symbolic link
// (ErrLink), never blocking on a FIFO put in its place, only a regular
// file of this user that group and others cannot write (ErrNotPrivate).
// A file they can read is narrowed to 0600, and warn says so. A missing
// file is an error matching fs.ErrNotExist. The caller closes the file.
func Open(path string, warn Warn) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow|oNonblock|oCloexec, 0)
	if err != nil {
		if isLoop(err) {
			return nil, nil, linkError(path)
		}
		return nil, nil, err
	}
	fi, err := checkOpened(f, path, warn)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ReadFile reads a private file of at most limit bytes with Open's checks.
// A larger file is an error.
func ReadFile(path string, limit int64, warn Warn) ([]byte, error) {
	f, fi, err := Open(path, warn)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d expected", path, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past the %d bytes expected", path, limit)
	}
	return b, nil
}

// checkOpened checks an opened file the way Open documents.
func checkOpened(f *os.File, path string, warn Warn) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi)
	}
	if err := checkOwner(fi, path, "file", "file"); err != nil {
		return nil, err
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return nil, fmt.Errorf("%s has mode %04o: other users could have written it; check it, then run chmod 600 %s: %w", path, perm, path, ErrNotPrivate)
	}
	if perm&0o077 != 0 {
		if err := f.Chmod(0o600); err != nil {
			return nil, fmt.Errorf("%s has mode %04o, readable by other users, and narrowing it to 0600 failed: %w; run chmod 600 %s", path, perm, err, path)
		}
		warn.say("%s had mode %04o (other users could read it); narrowed to 0600", path, perm)
	}
	return fi, nil
}

// OpenWrite opens a file the kernel writes in place (the events file, an
// export, the decision log, `kernel init`'s files): created 0600, or an
// existing regular file of this user with a single link, narrowed to 0600
// whatever its mode. A symbolic link in its place is refused (ErrLink) and
// its target left untouched, as is a hard-linked file (ErrLink) and
// anything but a regular file (a FIFO does not block the open). With
// appendOnly the file is opened for appending; otherwise it is truncated,
// after those checks.
func OpenWrite(path string, appendOnly bool) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, linkError(path)
		case !fi.Mode().IsRegular():
			return nil, notRegular(path, fi)
		}
	}
	flag := os.O_WRONLY | os.O_CREATE | oNoFollow | oNonblock | oCloexec
	if appendOnly {
		flag |= os.O_APPEND
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		if isLoop(err) { // the link appeared after the Lstat
			return nil, linkError(path)
		}
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		return fail(fmt.Errorf("%s: %w", path, err))
	case !fi.Mode().IsRegular():
		return fail(notRegular(path, fi))
	case links(fi) > 1:
		return fail(fmt.Errorf("%s has %d hard links, so writing it would change another file too: remove it, or name another file: %w", path, links(fi), ErrLink))
	}
	if err := checkOwner(fi, path, "file", "file"); err != nil {
		return fail(err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	if !appendOnly {
		if err := f.Truncate(0); err != nil {
			return fail(fmt.Errorf("%s: %w", path, err))
		}
	}
	return f, nil
}

// WriteFile replaces path with b: written to a new 0600 file beside it
// (created exclusively, so never through a link) and renamed over it, so
// a reader sees the old file or the new one, and a symbolic link in its
// place is replaced, not followed. durable also syncs the file and its
// directory before returning (the API keys); a cache entry needs not.
func WriteFile(path string, b []byte, durable bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o600) // CreateTemp's 0600 passes through the umask
	}
	if err == nil && durable {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	if durable {
		if d, err := os.Open(dir); err == nil {
			_ = d.Sync()
			d.Close()
		}
	}
	return nil
}

// NarrowTree narrows every file and directory under dir (itself included)
// that group or others may access to 0600 (directories 0700), quietly: it
// is for what a library creates inside a directory Dir made private
// (Badger's files), which nobody else could reach. Symbolic links are not
// followed. It returns how many it narrowed.
func NarrowTree(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		t := d.Type()
		if !t.IsRegular() && !t.IsDir() && t&fs.ModeSocket == 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Mode().Perm()&0o077 == 0 {
			return nil
		}
		mode := fs.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		}
		if os.Chmod(p, mode) == nil {
			n++
		}
		return nil
	})
	return n
}

// checkOwner refuses fi when another user owns it.
func checkOwner(fi fs.FileInfo, path, what, kind string) error {
	if uid := owner(fi); uid >= 0 && uid != os.Geteuid() {
		if what == kind {
			what = "the " + kind
		}
		return fmt.Errorf("%s %s belongs to uid %d, not to this process (uid %d): its owner could have written what the kernel would trust in it; choose another %s: %w", what, path, uid, os.Geteuid(), kind, ErrNotPrivate)
	}
	return nil
}

func notRegular(path string, fi fs.FileInfo) error {
	return fmt.Errorf("%s is not a regular file (%s): the kernel reads and writes only regular files as its own", path, fi.Mode().Type())
}

func linkError(path string) error {
	return fmt.Errorf("%s is a symbolic link: the kernel does not read or write its own files through one (it would reach the link's target instead); remove the link, or name the target itself: %w", path, ErrLink)
}
