package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestReadFile(t *testing.T) {
	e := newEnv(t, Config{MaxReadBytes: 4096})
	mkfiles(t, e.root, map[string]string{
		"small.txt":   "alpha\nbeta\r\ngamma",
		"lines.txt":   numbered(3000),
		"empty.txt":   "",
		"long.txt":    "short\n" + strings.Repeat("x", 5000) + "\nend\n",
		"latin1.txt":  "caf\xe9\n",
		"bin.dat":     "ELF\x00\x01\x02",
		"dir/x.txt":   "x\n",
		"big.txt":     strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", 200),
		"one-big.txt": strings.Repeat("y", 300) + "\n",
	})
	tests := []struct {
		name   string
		args   map[string]any
		golden string // golden file under testdata/read_file/
		err    string
	}{
		{name: "small file", args: map[string]any{"path": "small.txt"}, golden: "small.txt"},
		{name: "window", args: map[string]any{"path": "lines.txt", "offset": 10, "limit": 3}, golden: "window.txt"},
		{name: "default limit", args: map[string]any{"path": "lines.txt", "offset": 2990}, golden: "tail.txt"},
		{name: "line cap", args: map[string]any{"path": "lines.txt", "limit": 5}, golden: "line_cap.txt"},
		{name: "byte cap", args: map[string]any{"path": "big.txt"}, golden: "byte_cap.txt"},
		{name: "long line", args: map[string]any{"path": "long.txt"}, golden: "long_line.txt"},
		{name: "invalid utf8", args: map[string]any{"path": "latin1.txt"}, golden: "latin1.txt"},
		{name: "empty", args: map[string]any{"path": "empty.txt"}, golden: "empty.txt"},
		{name: "last line exactly", args: map[string]any{"path": "lines.txt", "offset": 3000}, golden: "last_line.txt"},
		{name: "binary", args: map[string]any{"path": "bin.dat"}, err: `read "bin.dat": it looks like a binary file (6 B, contains NUL bytes); read_file only shows text`},
		{name: "directory", args: map[string]any{"path": "dir"}, err: `read "dir": it is a directory; use list_dir`},
		{name: "missing", args: map[string]any{"path": "nope.txt"}, err: `read "nope.txt": no such file or directory in the workspace`},
		{name: "past the end", args: map[string]any{"path": "small.txt", "offset": 9}, err: `offset 9 is past the end of the file, which has 3 lines`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.call(t, "read_file", tc.args)
			if tc.err != "" {
				wantErr(t, err, tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "read_file/"+tc.golden, res.Content)
		})
	}
	t.Run("missing is ErrNotExist", func(t *testing.T) {
		_, err := e.call(t, "read_file", map[string]any{"path": "nope.txt"})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%v is not fs.ErrNotExist", err)
		}
	})
	t.Run("continuation reads everything", func(t *testing.T) {
		// Following the markers from offset 1 must yield every line once.
		seen, offset := 0, 1
		for range 100 {
			out := e.mustCall(t, "read_file", map[string]any{"path": "big.txt", "offset": offset})
			seen += strings.Count(out, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n")
			_, after, ok := strings.Cut(out, "Call read_file with offset=")
			if !ok {
				break
			}
			if _, err := fmt.Sscanf(after, "%d", &offset); err != nil {
				t.Fatal(err)
			}
		}
		if seen != 200 {
			t.Fatalf("read %d lines following the markers, want 200", seen)
		}
	})
}

func TestReadFileCancelled(t *testing.T) {
	e := newEnv(t, Config{})
	mkfiles(t, e.root, map[string]string{"a.txt": "a\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.callCtx(ctx, t, "read_file", map[string]any{"path": "a.txt"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestReadFileUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files regardless of permissions")
	}
	e := newEnv(t, Config{})
	mkfiles(t, e.root, map[string]string{"locked.txt": "x\n"})
	if err := os.Chmod(filepath.Join(e.root, "locked.txt"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := e.call(t, "read_file", map[string]any{"path": "locked.txt"})
	wantErr(t, err, `read "locked.txt": permission denied`)
}
