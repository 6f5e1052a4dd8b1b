package main

import (
	"fmt"
	"os"

	"github.com/agentkernel/agentkernel/internal/privfile"
)

// ErrLinkedFile is matched by the error of a file the kernel refuses to
// write because it is a symbolic link (or a hard link to another file).
var ErrLinkedFile = privfile.ErrLink

// openPrivate opens a file the kernel writes (the events file, an export,
// the decision log, the access log, `kernel init`'s files) the way
// privfile.OpenWrite does: 0600 whatever was there, never through a
// symbolic link (refused, its target untouched), never a hard-linked file
// or anything but a regular file. With appendOnly the file is opened for
// appending; otherwise it is truncated, after those checks.
func openPrivate(path string, appendOnly bool) (*os.File, error) {
	return privfile.OpenWrite(path, appendOnly)
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
