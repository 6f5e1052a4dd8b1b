package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrLinkedFile is matched by the error of a file the kernel refuses to
// write because it is a symbolic link (or a hard link to another file).
var ErrLinkedFile = errors.New("the kernel never writes its files through a link")

// openPrivate opens a file the kernel writes (the events file, an export,
// the decision log, `kernel init`'s files) readable by its owner only
// (0600, whatever the umask and whatever mode a file already there had).
// It never follows a symbolic link in the last component (O_NOFOLLOW: a
// link planted where the file goes is refused with an error naming it, and
// its target is left untouched), and refuses what is not a regular file
// with a single link. With appendOnly the file is opened for appending;
// otherwise it is truncated, after those checks.
func openPrivate(path string, appendOnly bool) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, linkRefusal(path)
		case !fi.Mode().IsRegular():
			return nil, notRegular(path, fi)
		}
	}
	flag := os.O_WRONLY | os.O_CREATE | oNoFollow | oNonblock
	if appendOnly {
		flag |= os.O_APPEND
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) { // the link appeared after the Lstat
			return nil, linkRefusal(path)
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
	case linkCount(fi) > 1:
		return fail(fmt.Errorf("%s has %d hard links, so writing it would change another file too: remove it, or name another file: %w", path, linkCount(fi), ErrLinkedFile))
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

func notRegular(path string, fi fs.FileInfo) error {
	return fmt.Errorf("%s is not a regular file (%s): the kernel writes only regular files", path, fi.Mode().Type())
}

func linkRefusal(path string) error {
	return fmt.Errorf("%s is a symbolic link: the kernel does not write through it (it would change the link's target instead); remove the link, or name the target itself: %w", path, ErrLinkedFile)
}

// writePrivateFile writes b to path through openPrivate: a session export
// holds prompts and tool output.
func writePrivateFile(path string, b []byte) error {
	f, err := openPrivate(path, false)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
