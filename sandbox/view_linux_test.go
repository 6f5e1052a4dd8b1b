package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlanView: the view holds each granted path bound at its real path,
// the symlinks on the way recreated as the host has them, binds the
// nearest bind above already shows the same way left out, and the private
// /tmp mounted before anything under it.
func TestPlanView(t *testing.T) {
	base := t.TempDir() // under /tmp: its binds land in the private /tmp
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(base, "real", "sub", "deeper"), 0o755))
	must(os.MkdirAll(filepath.Join(base, "ws", ".git"), 0o755))
	must(os.Symlink("real", filepath.Join(base, "link")))
	must(os.Symlink(filepath.Join(base, "real", "sub"), filepath.Join(base, "abs")))
	sp := &spec{Rules: []specRule{
		{Path: filepath.Join(base, "link", "sub"), Dir: true},           // through a relative link
		{Path: filepath.Join(base, "abs", "deeper"), Dir: true},         // through an absolute one: covered by real/sub
		{Path: filepath.Join(base, "ws"), Dir: true, RW: true},          // rw
		{Path: filepath.Join(base, "ws", ".git"), Dir: true},            // ro inside rw: kept
		{Path: filepath.Join(base, "real", "sub", "deeper"), Dir: true}, // the same again
	}}
	plan, err := planView(sp)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range plan {
		switch e.kind {
		case viewBind:
			mode := "ro"
			if e.rw {
				mode = "rw"
			}
			got = append(got, "bind "+e.dst+" "+mode)
		case viewLink:
			got = append(got, "link "+e.dst+" -> "+e.link)
		case viewTmp:
			got = append(got, "tmp "+e.dst)
		}
	}
	for _, want := range []string{
		"link " + filepath.Join(base, "link") + " -> real",
		"link " + filepath.Join(base, "abs") + " -> " + filepath.Join(base, "real", "sub"),
		"bind " + filepath.Join(base, "real", "sub") + " ro",
		"bind " + filepath.Join(base, "ws") + " rw",
		"bind " + filepath.Join(base, "ws", ".git") + " ro",
		"bind /dev/null rw",
		"tmp /tmp",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("plan lacks %q:\n%q", want, got)
		}
	}
	if slices.Contains(got, "bind "+filepath.Join(base, "real", "sub", "deeper")+" ro") {
		t.Errorf("a bind its parent's bind already shows was kept:\n%q", got)
	}
	if slices.Index(got, "tmp /tmp") > slices.Index(got, "bind "+filepath.Join(base, "ws")+" rw") {
		t.Errorf("the private /tmp comes after a bind under it:\n%q", got)
	}
	if slices.Index(got, "bind "+filepath.Join(base, "ws")+" rw") > slices.Index(got, "bind "+filepath.Join(base, "ws", ".git")+" ro") {
		t.Errorf(".git is bound before the workspace it is in:\n%q", got)
	}
}

// TestCopyDataBothWays: the view's copy, by sendfile and by its read/write
// fallback, carries a file byte for byte and stops at copyMax (a file that
// grew past it since the plan is cut there, not copied whole).
func TestCopyDataBothWays(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, copyMax+5000)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, copyFn := range map[string]func(v *viewBuilder, in, out int) error{
		"sendfile":   (*viewBuilder).copyData,
		"read/write": (*viewBuilder).readWrite,
	} {
		in, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, strings.ReplaceAll(name, "/", "-"))
		out, err := os.Create(dst)
		if err != nil {
			t.Fatal(err)
		}
		err = copyFn(&viewBuilder{}, int(in.Fd()), int(out.Fd()))
		in.Close()
		out.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data[:copyMax]) {
			t.Errorf("%s: copied %d bytes, want the first %d of the source exactly", name, len(got), copyMax)
		}
	}
}
