package builtin

import (
	"fmt"
	"strings"
	"testing"
)

func TestListDir(t *testing.T) {
	e := newEnv(t, Config{})
	mkfiles(t, e.root, map[string]string{
		"README.md":             strings.Repeat("r", 1500),
		"go.mod":                "module x\n",
		"cmd/kernel/main.go":    "package main\n",
		"cmd/kernel/deep/a/b.c": "x",
		"src/b.go":              "package src\n",
		"src/a.go":              "package src\n",
		".git/HEAD":             "ref: refs/heads/main\n",
		"empty/.keep":           "",
	})
	symlink(t, e.root, "src", "srclink")
	symlink(t, e.root, "missing", "broken")
	tests := []struct {
		name   string
		args   map[string]any
		golden string
		err    string
	}{
		{name: "root", args: map[string]any{}, golden: "root.txt"},
		{name: "depth 3", args: map[string]any{"depth": 3}, golden: "depth3.txt"},
		{name: "subdirectory", args: map[string]any{"path": "cmd/kernel", "depth": 2}, golden: "subdir.txt"},
		{name: "dot slash", args: map[string]any{"path": "./src/"}, golden: "src.txt"},
		{name: "through a symlink", args: map[string]any{"path": "srclink"}, golden: "srclink.txt"},
		{name: "a file", args: map[string]any{"path": "go.mod"}, err: `list "go.mod": not a directory (9 B); use read_file`},
		{name: "missing", args: map[string]any{"path": "nope"}, err: `list "nope": no such file or directory in the workspace`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.call(t, "list_dir", tc.args)
			if tc.err != "" {
				wantErr(t, err, tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "list_dir/"+tc.golden, res.Content)
		})
	}
}

func TestListDirCaps(t *testing.T) {
	t.Run("entry cap", func(t *testing.T) {
		e := newEnv(t, Config{MaxOutputBytes: 1 << 20})
		files := map[string]string{}
		for i := range 1200 {
			files[fmt.Sprintf("f%04d", i)] = ""
		}
		mkfiles(t, e.root, files)
		out := e.mustCall(t, "list_dir", map[string]any{})
		if n := strings.Count(out, "\n"); n != listMaxEntries {
			t.Fatalf("%d lines before the marker, want %d", n, listMaxEntries)
		}
		if !strings.HasSuffix(out, "[list_dir: showed 1000 entries; 200 more not shown. List a subdirectory or use a smaller depth.]") {
			t.Fatalf("missing or wrong marker: %q", out[len(out)-120:])
		}
	})
	t.Run("byte cap", func(t *testing.T) {
		e := newEnv(t, Config{MaxOutputBytes: 200})
		files := map[string]string{}
		for i := range 40 {
			files[fmt.Sprintf("file-%02d.txt", i)] = "x"
		}
		mkfiles(t, e.root, files)
		out := e.mustCall(t, "list_dir", map[string]any{})
		body, marker, ok := strings.Cut(out, "[list_dir:")
		if !ok || len(body) > 200 {
			t.Fatalf("body of %d bytes, marker %v:\n%s", len(body), ok, out)
		}
		shown := strings.Count(body, "\n")
		if want := fmt.Sprintf(" showed %d entries; %d more not shown.", shown, 40-shown); !strings.HasPrefix(marker, want) {
			t.Fatalf("marker %q, want prefix %q", marker, want)
		}
	})
	t.Run("empty", func(t *testing.T) {
		e := newEnv(t, Config{})
		if out := e.mustCall(t, "list_dir", map[string]any{}); out != `[list_dir: "." is empty]` {
			t.Fatalf("got %q", out)
		}
	})
}
