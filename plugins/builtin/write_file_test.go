package builtin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	e := newEnv(t, Config{MaxFileBytes: 100})
	mkfiles(t, e.root, map[string]string{"existing.txt": "old content\n", "adir/x": ""})
	if err := os.Chmod(filepath.Join(e.root, "existing.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, content string
		want                string // result, or error substring when err is true
		err                 bool
	}{
		{name: "create", path: "new.txt", content: "hello\n", want: "wrote 6 bytes to new.txt (created)"},
		{name: "create parents", path: "a/b/c/new.txt", content: "deep", want: "wrote 4 bytes to a/b/c/new.txt (created)"},
		{name: "replace", path: "existing.txt", content: "new\n", want: "wrote 4 bytes to existing.txt (replaced 12 bytes)"},
		{name: "empty content", path: "empty.txt", content: "", want: "wrote 0 bytes to empty.txt (created)"},
		{name: "cleaned path", path: "./a//b/../d.txt", content: "d", want: "wrote 1 bytes to a/d.txt (created)"},
		{name: "directory", path: "adir", content: "x", want: `write "adir": it is a directory`, err: true},
		{name: "parent is a file", path: "existing.txt/x", content: "x", want: `write "existing.txt/x": not a directory`, err: true},
		{name: "too large", path: "big.txt", content: string(make([]byte, 101)), want: "/content: is 101 bytes, over the limit of 100 bytes", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.call(t, "write_file", map[string]any{"path": tc.path, "content": tc.content})
			if tc.err {
				wantErr(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Content != tc.want {
				t.Fatalf("got %q, want %q", res.Content, tc.want)
			}
			if got := e.read(t, filepath.Clean(tc.path)); got != tc.content {
				t.Fatalf("file holds %q, want %q", got, tc.content)
			}
		})
	}
	fi, err := os.Stat(filepath.Join(e.root, "existing.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("replacing a file changed its mode to %v (%v)", fi.Mode(), err)
	}
}
