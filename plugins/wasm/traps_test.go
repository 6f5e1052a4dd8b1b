package wasm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// TestNoTrapsForHostPrograms: in a read-write mount that holds symlinks
// leaving it (placed by the operator or a host tool, see escapeTree), the
// guest can neither copy one (hard link), move one (rename), nor create a
// new link whose path runs through one; each would leave, for a host
// program reading the mount later, a path that resolves outside it. After
// every attempt, no name in the mount resolves outside it from the host's
// point of view except the operator's own links. Links inside the mount
// still work.
func TestNoTrapsForHostPrograms(t *testing.T) {
	_, mount, _ := escapeTree(t)
	fsys := newRootFS(openRoot(t, mount), false)
	for _, tc := range []struct {
		what string
		do   func() experimentalsys.Errno
	}{
		{"hard link to an escaping symlink", func() experimentalsys.Errno { return fsys.Link("/rel_escape", "/copy") }},
		{"hard link to an absolute escaping symlink", func() experimentalsys.Errno { return fsys.Link("/abs_escape", "/copy") }},
		{"rename an escaping symlink", func() experimentalsys.Errno { return fsys.Rename("/dir_escape", "/sub/moved") }},
		{"symlink through an escaping directory link", func() experimentalsys.Errno { return fsys.Symlink("dir_escape/secret.txt", "/through") }},
		{"symlink to an escaping symlink", func() experimentalsys.Errno { return fsys.Symlink("rel_escape", "/chain") }},
		{"symlink from a subdirectory through an escaping link", func() experimentalsys.Errno { return fsys.Symlink("../dir_escape", "/sub/up") }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if e := tc.do(); e != experimentalsys.EPERM {
				t.Fatalf("errno %v, want EPERM", e)
			}
		})
	}
	// What the host sees: only the operator's links lead out.
	operators := map[string]bool{"rel_escape": true, "abs_escape": true, "dir_escape": true}
	err := filepath.Walk(mount, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.Mode()&os.ModeSymlink == 0 {
			return err
		}
		rel, _ := filepath.Rel(mount, p)
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil // dangling: leads nowhere
		}
		if !strings.HasPrefix(real, mount+string(filepath.Separator)) && !operators[rel] {
			t.Errorf("%s resolves to %s, outside the mount", rel, real)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Inside the mount, links still work.
	for _, e := range []experimentalsys.Errno{
		fsys.Link("/file.txt", "/hard.txt"),
		fsys.Rename("/inner", "/sub/inner"),
		fsys.Symlink("nested.txt", "/sub/soft"),
		fsys.Symlink("sub/nested.txt", "/down"),
	} {
		if e != 0 {
			t.Fatalf("a link inside the mount failed: %v", e)
		}
	}
	if got, e := readAll(t, fsys, "/down"); e != 0 || got != "nested" {
		t.Fatalf("read through a downward link: %q, %v", got, e)
	}
}
