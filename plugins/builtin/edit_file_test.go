package builtin

import (
	"testing"
)

func TestEditFile(t *testing.T) {
	const src = "package main\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	tests := []struct {
		name     string
		file     string
		old, new string
		want     string // result, or error substring when err is true
		err      bool
		after    string // file content after; "" means unchanged
	}{
		{name: "unique", file: src, old: "func a() {\n\treturn 1", new: "func a() {\n\treturn 2",
			want:  "edited f.go: replaced 2 lines at line 3 with 2 lines; the file is now 61 bytes (was 61)",
			after: "package main\n\nfunc a() {\n\treturn 2\n}\n\nfunc b() {\n\treturn 1\n}\n"},
		{name: "delete", file: src, old: "\nfunc b() {\n\treturn 1\n}\n", new: "",
			want: "edited f.go: deleted 4 lines at line 6; the file is now 37 bytes (was 61)", after: "package main\n\nfunc a() {\n\treturn 1\n}\n"},
		{name: "zero matches", file: src, old: "func c()", new: "x", err: true,
			want: `edit "f.go": old text not found; nothing was changed. Hint: old must match the file exactly`},
		{name: "zero matches, indentation differs", file: src, old: "func b() {\n    return 1\n}", new: "x", err: true,
			want: "a block that differs only in whitespace or indentation starts at line 7"},
		{name: "zero matches, line numbers pasted", file: src, old: "     4\treturn 1", new: "x", err: true,
			want: "old seems to include read_file's line-number prefixes"},
		{name: "several matches", file: src, old: "\treturn 1\n", new: "\treturn 2\n", err: true,
			want: `edit "f.go": old text occurs 2 times (at lines 4, 8); nothing was changed. Include more surrounding lines`},
		{name: "overlapping matches", file: "aaa\n", old: "aa", new: "b", err: true, want: "occurs 2 times (at lines 1, 1)"},
		{name: "crlf file, lf old", file: "one\r\ntwo\r\nthree\r\n", old: "one\ntwo", new: "1\n2",
			want: "edited f.go: replaced 2 lines at line 1 with 2 lines; the file is now 13 bytes (was 17)", after: "1\r\n2\r\nthree\r\n"},
		{name: "binary", file: "a\x00b", old: "a", new: "b", err: true, want: "it looks like a binary file"},
		{name: "identical", file: src, old: "a", new: "a", err: true, want: "/new: is identical to old"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			mkfiles(t, e.root, map[string]string{"f.go": tc.file})
			res, err := e.call(t, "edit_file", map[string]any{"path": "f.go", "old": tc.old, "new": tc.new})
			if tc.err {
				wantErr(t, err, tc.want)
			} else if err != nil {
				t.Fatal(err)
			} else if res.Content != tc.want {
				t.Fatalf("got %q, want %q", res.Content, tc.want)
			}
			want := tc.after
			if want == "" {
				want = tc.file
			}
			if got := e.read(t, "f.go"); got != want {
				t.Fatalf("file is %q, want %q", got, want)
			}
		})
	}
}

func TestEditFileLimits(t *testing.T) {
	e := newEnv(t, Config{MaxFileBytes: 10})
	mkfiles(t, e.root, map[string]string{"big.txt": "0123456789abc", "d/x": ""})
	_, err := e.call(t, "edit_file", map[string]any{"path": "big.txt", "old": "0", "new": "1"})
	wantErr(t, err, `edit "big.txt": the file is 13 B, over the edit limit of 10 B`)
	_, err = e.call(t, "edit_file", map[string]any{"path": "d", "old": "0", "new": "1"})
	wantErr(t, err, `edit "d": it is a directory`)
	_, err = e.call(t, "edit_file", map[string]any{"path": "nope", "old": "0", "new": "1"})
	wantErr(t, err, `edit "nope": no such file or directory in the workspace`)
}
