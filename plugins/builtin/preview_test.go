package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/tool"
)

// TestPreviewIsWhatTheCallDoes previews a call, then makes it, and holds
// the preview to what happened: refused exactly when the call failed,
// with the call's error; otherwise a diff that `patch -p1 --dry-run`
// accepts against the file as it was, that patch turns into the file as
// the call left it, and that is byte for byte what `diff -u` prints for
// the two.
func TestPreviewIsWhatTheCallDoes(t *testing.T) {
	const four = "one\ntwo\nthree\nfour\n"
	big := strings.Repeat("0123456789abcdef\n", previewMax/17+10)
	type file = map[string]string
	tests := []struct {
		name  string
		files file
		tool  string
		args  map[string]any
		// refused is a substring of the error the call fails with; note
		// one of the preview's note, "" for none.
		refused, note string
		noDiff        bool
	}{
		{name: "edit: aa in aaa is ambiguous", files: file{"f.txt": "aaa\n"}, tool: "edit_file",
			args: map[string]any{"path": "f.txt", "old": "aa", "new": "b"}, refused: "old text occurs 2 times"},
		{name: "edit: CRLF file, LF old", files: file{"f.txt": "one\r\ntwo\r\nthree\r\n"}, tool: "edit_file",
			args: map[string]any{"path": "f.txt", "old": "one\ntwo", "new": "1\n2"}, note: "CRLF"},
		{name: "edit: unique", files: file{"f.txt": four}, tool: "edit_file",
			args: map[string]any{"path": "f.txt", "old": "two\n", "new": "TWO\n2\n"}},
		{name: "edit: append after the last line", files: file{"f.txt": four}, tool: "edit_file",
			args: map[string]any{"path": "f.txt", "old": "four\n", "new": "four\n\nfive\n"}},
		{name: "edit: file without a final newline", files: file{"f.txt": "one\ntwo"}, tool: "edit_file",
			args: map[string]any{"path": "f.txt", "old": "two", "new": "two\nthree"}},
		{name: "edit: not found", files: file{"f.txt": four}, tool: "edit_file",
			args: map[string]any{"path": "f.txt", "old": "five", "new": "5"}, refused: "old text not found"},
		{name: "edit: missing file", tool: "edit_file",
			args: map[string]any{"path": "nope.txt", "old": "a", "new": "b"}, refused: "no such file"},
		{name: "edit: binary file", files: file{"f.bin": "a\x00b"}, tool: "edit_file",
			args: map[string]any{"path": "f.bin", "old": "a", "new": "b"}, refused: "binary file"},
		{name: "edit: empties the file", files: file{"f.txt": "all\n"}, tool: "edit_file",
			args: map[string]any{"path": "f.txt", "old": "all\n", "new": ""}, note: "emptied"},
		{name: "write: new file", tool: "write_file",
			args: map[string]any{"path": "d/new.txt", "content": four}, note: "a new file"},
		{name: "write: new file without a final newline", tool: "write_file",
			args: map[string]any{"path": "new.txt", "content": "one\ntwo"}, note: "a new file"},
		{name: "write: new empty file", tool: "write_file",
			args: map[string]any{"path": "new.txt", "content": ""}, note: "a new, empty file", noDiff: true},
		{name: "write: append at the end", files: file{"f.txt": four}, tool: "write_file",
			args: map[string]any{"path": "f.txt", "content": four + "five\n"}},
		{name: "write: add to a file without a final newline", files: file{"f.txt": "one\ntwo"}, tool: "write_file",
			args: map[string]any{"path": "f.txt", "content": "one\ntwo\nthree\n"}},
		{name: "write: CRLF file", files: file{"f.txt": "a\r\nb\r\nc\r\n"}, tool: "write_file",
			args: map[string]any{"path": "f.txt", "content": "a\r\nB\r\nc\r\n"}},
		{name: "write: emptied file", files: file{"f.txt": four}, tool: "write_file",
			args: map[string]any{"path": "f.txt", "content": ""}, note: "emptied"},
		{name: "write: same content", files: file{"f.txt": four}, tool: "write_file",
			args: map[string]any{"path": "f.txt", "content": four}, note: "no change", noDiff: true},
		{name: "write: binary file", files: file{"f.bin": "a\x00b"}, tool: "write_file",
			args: map[string]any{"path": "f.bin", "content": "text\n"}, note: "binary content, not shown as a diff: 3 B replaced by 5 B", noDiff: true},
		{name: "write: huge file", files: file{"big.txt": big}, tool: "write_file",
			args: map[string]any{"path": "big.txt", "content": "small\n"}, note: "too big to show as a diff", noDiff: true},
		{name: "write: a directory", files: file{"d/x": ""}, tool: "write_file",
			args: map[string]any{"path": "d", "content": "x"}, refused: "it is a directory"},
		{name: "write: leaves the workspace", tool: "write_file",
			args: map[string]any{"path": "../outside/secret.txt", "content": "x"}, refused: "outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			mkfiles(t, e.root, tc.files)
			path, _ := tc.args["path"].(string)
			before, existed := readIf(t, filepath.Join(e.root, path))
			raw, _ := json.Marshal(tc.args)
			pv, err := e.tools[tc.tool].(tool.Previewer).Preview(context.Background(), raw)
			if err != nil {
				t.Fatalf("Preview: %v", err)
			}
			_, callErr := e.tools[tc.tool].Call(context.Background(), raw)
			if tc.refused != "" {
				wantErr(t, callErr, tc.refused)
				if !pv.Refused || pv.Summary != callErr.Error() || len(pv.Files) != 0 {
					t.Fatalf("preview = %+v; want refused with the call's error %q", pv, callErr)
				}
				return
			}
			if callErr != nil {
				t.Fatalf("call: %v", callErr)
			}
			if pv.Refused || len(pv.Files) != 1 {
				t.Fatalf("preview = %+v; want one file changed", pv)
			}
			fc := pv.Files[0]
			if fc.Path != path || fc.Created == existed || !strings.Contains(fc.Note, tc.note) {
				t.Fatalf("file change = %+v; want path %s, created %v, a note with %q", fc, path, !existed, tc.note)
			}
			after, _ := readIf(t, filepath.Join(e.root, path))
			if tc.noDiff {
				if fc.Diff != "" {
					t.Fatalf("diff shown: %s", fc.Diff)
				}
				return
			}
			if want := diffU(t, path, before, after, existed); fc.Diff != want {
				t.Fatalf("preview diff:\n%s\ndiff -u:\n%s", fc.Diff, want)
			}
			patchDryRun(t, path, fc.Diff, before, after, existed)
		})
	}
}

// TestPreviewShowsNoKernelFile: a kernel file the call refuses to write
// is not shown, under its own name or under another (a hard link).
func TestPreviewShowsNoKernelFile(t *testing.T) {
	e0 := t.TempDir()
	kfile := filepath.Join(e0, "kernel.yaml")
	if err := os.WriteFile(kfile, []byte("api_key: "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{Protected: []string{kfile}})
	if err := os.Link(kfile, filepath.Join(e.root, "innocent.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, tl := range []string{"write_file", "edit_file"} {
		raw, _ := json.Marshal(map[string]any{"path": "innocent.yaml", "content": "x", "old": "api_key", "new": "x"})
		if tl == "write_file" {
			raw, _ = json.Marshal(map[string]any{"path": "innocent.yaml", "content": "x"})
		}
		pv, err := e.tools[tl].(tool.Previewer).Preview(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(pv)
		if !pv.Refused || strings.Contains(string(b), secret) {
			t.Fatalf("%s: preview of a kernel file = %s", tl, b)
		}
	}
}

func readIf(t *testing.T, p string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if fi, serr := os.Stat(p); serr == nil && fi.IsDir() {
		return "", true
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// diffU is what `diff -u` prints for the change of path from before to
// after, labelled as the preview labels it.
func diffU(t *testing.T, path, before, after string, existed bool) string {
	t.Helper()
	dir := t.TempDir()
	from, pa := "a/"+path, filepath.Join(dir, "before")
	if !existed {
		from, pa = "/dev/null", "/dev/null"
	} else if err := os.WriteFile(pa, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	pb := filepath.Join(dir, "after")
	if err := os.WriteFile(pb, []byte(after), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("diff", "-u", "--label", from, "--label", "b/"+path, pa, pb).Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("diff: %v", err)
	}
	return string(out)
}

// patchDryRun checks `patch -p1 --dry-run` accepts diff against the file
// as it was, and that patch then makes it what the call made.
func patchDryRun(t *testing.T, path, diff, before, after string, existed bool) {
	t.Helper()
	dir := t.TempDir()
	if existed {
		mkfiles(t, dir, map[string]string{path: before})
	}
	for _, args := range [][]string{{"-p1", "--dry-run", "--batch"}, {"-p1", "--batch"}} {
		cmd := exec.Command("patch", args...)
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(diff)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch %v: %v\n%s\ndiff:\n%s", args, err, out, diff)
		}
	}
	got, _ := readIf(t, filepath.Join(dir, path))
	if got != after {
		t.Fatalf("patched file = %q, the call made %q", got, after)
	}
}
