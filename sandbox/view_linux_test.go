package sandbox

import (
	"os"
	"path/filepath"
	"slices"
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
