package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/sandboxtest"
)

// Attacks on the view's build: a tool that can write a directory bound
// into another sandbox's view changes it while that view is being built,
// after the launcher planned it from the host's tree. The window is
// opened deterministically: the launcher copies granted small files into
// the view, and the test holds a write lease on one of them, so the
// launcher's open of it blocks until the test, told of the open by the
// lease break, has changed the host's tree as a tool would, and lets go.

// pauseAtCopy takes a write lease on file and returns a function that
// waits until some process opens it (the launcher, copying it into the
// view), runs change, then releases the lease so the open goes on. It
// returns early, changing nothing, once done is closed (the launcher
// ended before it came to file).
func pauseAtCopy(t *testing.T, file string) (wait func(change func(), done <-chan struct{}) error) {
	t.Helper()
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		t.Fatalf("a write lease on %s: %v", file, err)
	}
	return func(change func(), done <-chan struct{}) error {
		defer unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
		// A lease being broken reports the type it is going down to.
		for deadline := time.Now().Add(time.Minute); ; {
			l, err := unix.FcntlInt(uintptr(fd), unix.F_GETLEASE, 0)
			if err != nil {
				return err
			}
			if l != unix.F_WRLCK {
				break
			}
			if time.Now().After(deadline) {
				return errors.New("nobody opened " + file + " in a minute")
			}
			select {
			case <-done:
				return nil
			case <-time.After(time.Millisecond):
			}
		}
		change()
		return nil
	}
}

// startPaused starts argv under g and, while the launcher waits on the
// leased file, runs change; it returns the program's output and error.
func startPaused(t *testing.T, g sandbox.Grant, leased string, change func(), argv ...string) (string, error) {
	t.Helper()
	return startPausedAt(t, g, []pause{{leased, change}}, argv...)
}

// pause is a file the launcher copies into the view, and what to change
// while it waits to open it.
type pause struct {
	file   string
	change func()
}

// startPausedAt is startPaused with several pauses, in the order the
// launcher copies their files.
func startPausedAt(t *testing.T, g sandbox.Grant, pauses []pause, argv ...string) (string, error) {
	t.Helper()
	waits := make([]func(func(), <-chan struct{}) error, len(pauses))
	for i, p := range pauses {
		waits[i] = pauseAtCopy(t, p.file)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, err := command(ctx, g, argv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	done, waited := make(chan struct{}), make(chan error, 1)
	go func() {
		err := cmd.Wait()
		close(done)
		waited <- err
	}()
	for i, p := range pauses {
		if err := waits[i](p.change, done); err != nil {
			t.Error(err)
		}
	}
	err = <-waited
	return out.String(), err
}

// viewBase is a directory for these tests outside /tmp: under the
// sandbox's private /tmp every granted file is bound, not copied, and the
// lease needs a copy.
func viewBase(t *testing.T) string {
	t.Helper()
	b, err := os.MkdirTemp("/var/tmp", "sbx-planted-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(b) })
	return b
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFiles(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		if err := os.WriteFile(f, []byte("granted\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// docsLayout makes the layout TestPlantedLinkMakesNoHostDir and
// TestPlantedLinkRedirectsNoBind share: ws/out (rw, the tool's),
// ws/docs/a.txt and b.txt (ro, copied: the builder makes ws/docs, and
// b.txt is the leased one) and ws/out/q/docs (ro). plant replaces
// ws/out/q by a link to "..", as the tool does.
func docsLayout(t *testing.T) (docs, leased string, g sandbox.Grant, plant func()) {
	t.Helper()
	ws := filepath.Join(viewBase(t), "ws")
	docs, out := filepath.Join(ws, "docs"), filepath.Join(ws, "out")
	mkdirs(t, docs, filepath.Join(out, "q", "docs"))
	writeFiles(t, filepath.Join(docs, "a.txt"), filepath.Join(docs, "b.txt"))
	g = sandbox.Grant{FS: append(sandbox.SystemDirs(),
		sandbox.FSRule{Path: out, Mode: "rw"},
		sandbox.FSRule{Path: filepath.Join(docs, "a.txt"), Mode: "ro"},
		sandbox.FSRule{Path: filepath.Join(docs, "b.txt"), Mode: "ro"},
		sandbox.FSRule{Path: filepath.Join(out, "q", "docs"), Mode: "ro"})}
	plant = func() {
		if err := os.RemoveAll(filepath.Join(out, "q")); err != nil {
			t.Error(err)
		}
		if err := os.Symlink("..", filepath.Join(out, "q")); err != nil {
			t.Error(err)
		}
	}
	return docs, filepath.Join(docs, "b.txt"), g, plant
}

// TestPlantedLinkMakesNoHostDir: the view builder remembers the
// directories it made on its own tmpfs (no stat for each), and must
// forget them at every mount, not only at those below the mount's path:
// a mount's target resolves through symlinks, and one planted in a
// tool-writable bind lands a mount on a directory the builder made.
// Here ws/out is writable (by this tool or another); the grant also holds
// ws/docs/a.txt, ws/docs/b.txt (copied: the builder makes ws/docs on its
// tmpfs), ws/out/q/docs ro and ws/docs/x/y ro. While b.txt is copied the
// "tool" replaces ws/out/q by a link to "..", so ws/out/q/docs's bind
// lands on the builder's ws/docs, and removes ws/docs/x on the host
// (ws is writable to it). ws/docs/x/y is then placed inside what is now
// the host's ws/docs: a builder that still believes ws/docs is its own
// makes ws/docs/x on the host. The launch must fail closed and leave the
// host's ws/docs as the tool left it.
func TestPlantedLinkMakesNoHostDir(t *testing.T) {
	if !sandbox.Check().Has(sandbox.LayerFSView) {
		t.Fatal("no file system view here")
	}
	docs, leased, g, plant := docsLayout(t)
	mkdirs(t, filepath.Join(docs, "x", "y"))
	g.FS = append(g.FS, sandbox.FSRule{Path: filepath.Join(docs, "x", "y"), Mode: "ro"})
	res, err := startPaused(t, g, leased, func() {
		plant()
		if err := os.RemoveAll(filepath.Join(docs, "x")); err != nil {
			t.Error(err)
		}
	}, "true")
	if _, serr := os.Lstat(filepath.Join(docs, "x")); serr == nil {
		t.Fatalf("the launcher made %s on the host (launch: %v %s)", filepath.Join(docs, "x"), err, res)
	}
	if err == nil {
		t.Fatalf("the view was built on a changed tree: %s", res)
	}
	t.Logf("refused: %v %s", err, res)
}

// TestPlantedLinkRedirectsNoBind: a bind's source and target are the
// real paths the plan resolved, with no link on the way; a link a tool
// plants there after the plan must not redirect the bind. Here the grant
// holds ws/out rw, ws/docs/a.txt and b.txt, and ws/out/q/docs ro; a
// daemon listens in a directory of the host's ws/docs that is not
// granted. While b.txt is copied the "tool" replaces ws/out/q by a link
// to "..": followed, ws/out/q/docs's bind puts the host's whole ws/docs
// (daemon included) over the view's ws/docs, and a pathname socket is
// what the view exists to hide (connect(2) is no Landlock right). After
// the bind the tool puts a directory back, so that nothing after the bind
// (mount flags, Landlock) meets a link. The launch must fail closed, or
// the program must not reach the daemon. Checked: with the bind's paths
// resolved through links (openNoLinks without RESOLVE_NO_SYMLINKS) the
// program reaches the daemon by stream and datagram.
func TestPlantedLinkRedirectsNoBind(t *testing.T) {
	if !sandbox.Check().Has(sandbox.LayerFSView) {
		t.Fatal("no file system view here")
	}
	needPython(t)
	docs, leased, g, plant := docsLayout(t)
	_, stream, dgram, got := sandboxtest.UnixDaemon(t, docs)
	// A second pause after ws/out/q/docs is bound (a copy one level
	// deeper) puts a directory back at ws/out/q, so that Landlock's rule,
	// opened later, finds no link: only the bind can refuse it.
	base := filepath.Dir(filepath.Dir(docs))
	later := filepath.Join(base, "l1", "l2", "l3", "l4", "later.txt")
	mkdirs(t, filepath.Dir(later))
	writeFiles(t, later)
	g.FS = append(g.FS, sandbox.FSRule{Path: later, Mode: "ro"})
	q := filepath.Join(filepath.Dir(docs), "out", "q")
	res, err := startPausedAt(t, g, []pause{{leased, plant}, {later, func() {
		if err := os.Remove(q); err != nil {
			t.Error(err)
		}
		mkdirs(t, filepath.Join(q, "docs"))
	}}}, python, "-c", sandboxtest.UnixClient, stream, dgram)
	if strings.Contains(res, "stream reached") || strings.Contains(res, "dgram sent") || len(got) > 0 {
		t.Fatalf("a planted link redirected a bind: the host's %s is in the view:\n%s", docs, res)
	}
	if err == nil {
		t.Fatalf("the view was built on a changed tree: %s", res)
	}
	t.Logf("refused: %v %s", err, res)
}

// TestPlantedLinkUnsealsNothing: the rules made on paths after the view
// is built (an rw bind losing read-only, an rw Landlock rule) are made on
// the place the plan resolved, not on what the path leads to by then.
// Here the grant holds a ro, a/b rw, c ro and e/f/g.txt (copied after
// a/b is bound). While g.txt is copied a "tool" with a writable (another
// tool's grant) moves the directory a/b is bound on out of the way and
// puts a link to the view's root in its place. Followed, the rw change
// would lift read-only from every mount of the view, and the rw Landlock
// rule would cover the view's root. The launch must fail closed; if it
// runs, c must still be a read-only mount (EROFS) and / not listable
// (Landlock grants nothing there).
//
// Each defense alone: with Landlock's rule opened by path the program
// lists / (fails here); the mount flags set through the bind's tree
// descriptor hold only together with it (Landlock refuses the link
// first), and matter alone where Landlock is allowed missing.
func TestPlantedLinkUnsealsNothing(t *testing.T) {
	if !sandbox.Check().Has(sandbox.LayerFSView) {
		t.Fatal("no file system view here")
	}
	base := viewBase(t)
	a, c := filepath.Join(base, "a"), filepath.Join(base, "c")
	ab := filepath.Join(a, "b")
	mkdirs(t, ab, c, filepath.Join(base, "e", "f"))
	writeFiles(t, filepath.Join(base, "e", "f", "g.txt"))
	g := sandbox.Grant{FS: append(sandbox.SystemDirs(),
		sandbox.FSRule{Path: a, Mode: "ro"},
		sandbox.FSRule{Path: ab, Mode: "rw"},
		sandbox.FSRule{Path: c, Mode: "ro"},
		sandbox.FSRule{Path: filepath.Join(base, "e", "f", "g.txt"), Mode: "ro"})}
	// From a/b up to the view's root.
	up := strings.Repeat("../", strings.Count(a, "/"))
	res, err := startPaused(t, g, filepath.Join(base, "e", "f", "g.txt"), func() {
		if err := os.Rename(ab, filepath.Join(a, "moved")); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(up, ab); err != nil {
			t.Error(err)
		}
	}, "sh", "-c", "touch "+c+"/f; ls / >/dev/null && echo listed the root; echo done")
	if err == nil && !strings.Contains(res, "done") {
		t.Fatalf("the program did not run:\n%s", res)
	}
	if err == nil && !strings.Contains(res, "Read-only file system") {
		t.Errorf("a planted link lifted read-only from the view's other mounts (%s):\n%s", c, res)
	}
	if strings.Contains(res, "listed the root") {
		t.Errorf("a planted link moved an rw Landlock rule to the view's root:\n%s", res)
	}
	if err == nil {
		t.Errorf("the sandbox started on a changed tree:\n%s", res)
	}
}
