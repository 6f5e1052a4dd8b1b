package sandbox_test

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/sandboxtest"
)

// The second round of attacks (issue 25): host unix sockets, the launcher
// as a target, and limits that hold for the sandbox as a whole.

const python = "/usr/bin/python3"

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the attack needs %s (make test installs it): %v", python, err)
	}
}

// runAttack runs a python3 attack script under the workspace grant; it
// must run to its end ("done").
func runAttack(t *testing.T, script string) (string, error) {
	t.Helper()
	needPython(t)
	ws := newWorkspace(t)
	out, err := run(t, workspaceGrant(ws), ws, python, "-c", script)
	if !strings.Contains(out, "done") {
		t.Fatalf("the attack did not run to its end (err %v):\n%s", err, out)
	}
	return out, err
}

// TestHostUnixSocketsUnreachable: a daemon's pathname socket under /run,
// /var/tmp or /tmp (with the workspace under /tmp too) cannot be reached
// from a program with no grant for its directory, by connect or by
// sendto; with the directory granted (ro) it can, so the wall is the
// sandbox's and not a broken socket.
func TestHostUnixSocketsUnreachable(t *testing.T) {
	needPython(t)
	for _, base := range []string{"/run", "/var/tmp", "/tmp"} {
		t.Run(base, func(t *testing.T) {
			if st, err := os.Stat(base); err != nil || !st.IsDir() {
				t.Fatalf("%s is not a directory on this machine: %v", base, err)
			}
			// The workspace is under /tmp as well, the case where the
			// sandbox used to keep the host's /tmp.
			ws, err := os.MkdirTemp("/tmp", "ws-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(ws) })
			dir, stream, dgram, got := sandboxtest.UnixDaemon(t, base)
			g := workspaceGrant(ws)
			out, _ := run(t, g, ws, python, "-c", sandboxtest.UnixClient, stream, dgram)
			if strings.Contains(out, "stream reached") || strings.Contains(out, "dgram sent") || len(got) > 0 {
				t.Fatalf("a host socket under %s was reached without a grant:\n%s", base, out)
			}
			if !strings.Contains(out, "stream refused") {
				t.Fatalf("the client did not run:\n%s", out)
			}
			g.FS = append(g.FS, sandbox.FSRule{Path: dir, Mode: "ro"})
			out, err = run(t, g, ws, python, "-c", sandboxtest.UnixClient, stream, dgram)
			if !strings.Contains(out, "stream reached") || !strings.Contains(out, "dgram sent") {
				t.Fatalf("the socket was not reachable with %s granted (err %v):\n%s", dir, err, out)
			}
		})
	}
}

// TestLauncherOutOfReach: the program cannot trace the launcher, read its
// memory, take its descriptors or kill it, so it cannot forge the report
// the kernel gets: the call ends with the program's real exit code.
func TestLauncherOutOfReach(t *testing.T) {
	out, err := runAttack(t, sandboxtest.LauncherAttack)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, " ok") && !strings.HasPrefix(line, "pidfd_open") {
			t.Errorf("the program reached the launcher: %s", line)
		}
	}
	var ec interface{ ExitCode() int }
	if !errors.As(err, &ec) || ec.ExitCode() != 7 {
		t.Fatalf("Wait returned %v, want the program's exit code 7 (a forged or lost report):\n%s", err, out)
	}
}

// TestProgramInheritsTheConfinedThread: the launcher sets no_new_privs,
// Landlock, the seccomp filter and the dropped capabilities on its locked
// thread alone, and the program must carry every one of them from the
// fork: its own /proc/self/status shows no_new_privs, a seccomp filter
// and no capability, and Landlock (only Landlock: the view's root is a
// tmpfs the program could list, and no rule covers it) refuses to list
// the view's root. A program forked from any other launcher thread, or a
// restriction skipped, shows one of them missing.
func TestProgramInheritsTheConfinedThread(t *testing.T) {
	layers := sandbox.Check()
	for _, l := range []sandbox.Layer{sandbox.LayerLandlock, sandbox.LayerSeccomp, sandbox.LayerFSView} {
		if !layers.Has(l) {
			t.Fatalf("layer %s is missing on this machine: this test proves nothing without it", l)
		}
	}
	ws := newWorkspace(t)
	out, err := run(t, workspaceGrant(ws), ws, "sh", "-c",
		`grep -E '^(NoNewPrivs|Seccomp|CapEff|CapPrm|CapBnd):' /proc/self/status; ls / >/dev/null 2>&1 && echo "listed /"; echo done`)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("err %v:\n%s", err, out)
	}
	for _, want := range []string{"NoNewPrivs:\t1\n", "Seccomp:\t2\n", "CapEff:\t0000000000000000\n", "CapPrm:\t0000000000000000\n", "CapBnd:\t0000000000000000\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the program's status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "listed /") {
		t.Errorf("the program listed the view's root: it is not in the launcher's Landlock domain:\n%s", out)
	}
}

// TestMemoryBoundsTheSandbox: memory_mb bounds the sandbox's processes
// together, not each one: three processes of 150 MiB each, under 256 MiB
// of address space apiece, are stopped at memory_mb 256 together, and the
// limit is named.
func TestMemoryBoundsTheSandbox(t *testing.T) {
	needPython(t)
	ws := newWorkspace(t)
	g := workspaceGrant(ws)
	g.MemoryMB = 256
	out, err := run(t, g, ws, python, "-c", sandboxtest.MemoryTogether)
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Limit != "memory_mb" {
		t.Fatalf("three processes of 150 MiB ran under memory_mb 256: want the memory_mb limit named, got %v:\n%s", err, out)
	}
	t.Logf("%v", le)
}

// TestForkBombNamed: the classic fork bomb ends with max_procs named, not
// as a launcher that died (it must still start threads while the bomb
// fills the sandbox) or a bare exit status. Five bombs in a row: one was
// enough, under load, to starve a launcher that shared pid_max with the
// bomb.
func TestForkBombNamed(t *testing.T) {
	ws := newWorkspace(t)
	g := workspaceGrant(ws)
	g.MaxProcs = 64
	g.Timeout = sandbox.Duration(20e9)
	for range 5 {
		out, err := run(t, g, ws, "sh", "-c", `b() { b | b & }; b; sleep 0.5; exit 0`)
		var le *sandbox.LimitError
		if !errors.As(err, &le) || le.Limit != "max_procs" {
			t.Fatalf("a fork bomb under max_procs 64: want max_procs named, got %v:\n%s", err, lastLines(out))
		}
		m := regexp.MustCompile(`(\d+) times`).FindStringSubmatch(le.Detail)
		if m == nil {
			t.Fatalf("the error does not say how often a fork failed: %v", le)
		}
		if n, _ := strconv.Atoi(m[1]); n == 0 {
			t.Fatalf("no fork failed: %v", le)
		}
	}
}

// TestSeccompHolds: a new user namespace (every capability inside it),
// io_uring, the keyrings and vsock (the hypervisor's host, whatever the
// network namespace) are out of the program's reach.
func TestSeccompHolds(t *testing.T) {
	out, _ := runAttack(t, sandboxtest.SeccompProbe)
	for _, want := range []string{"unshare user namespace denied errno 1", "io_uring_setup denied errno 1", "keyctl denied errno 1", "socket vsock denied errno 97"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q:\n%s", want, out)
		}
	}
}

// TestViewModes: modes nest in the view as the grant says: ro, rw inside
// it, ro inside that, each enforced by its own mount (EROFS), not only
// by Landlock.
func TestViewModes(t *testing.T) {
	a := t.TempDir()
	b, c := a+"/b", a+"/b/c"
	if err := os.MkdirAll(c, 0o755); err != nil {
		t.Fatal(err)
	}
	g := sandbox.Grant{FS: append(sandbox.SystemDirs(),
		sandbox.FSRule{Path: a, Mode: "ro"}, sandbox.FSRule{Path: b, Mode: "rw"}, sandbox.FSRule{Path: c, Mode: "ro"})}
	out, err := run(t, g, b, "sh", "-c", "for d in "+a+" "+b+" "+c+"; do (echo x > $d/f && echo $d written) 2>&1; done; echo done")
	if !strings.Contains(out, "done") {
		t.Fatalf("err %v:\n%s", err, out)
	}
	if !strings.Contains(out, b+" written") {
		t.Errorf("the rw directory inside a ro one is not writable:\n%s", out)
	}
	for _, d := range []string{a, c} {
		if strings.Contains(out, d+" written") || !strings.Contains(out, "Read-only file system") {
			t.Errorf("%s is writable, or not by its mount:\n%s", d, out)
		}
	}
}

// TestViewHoldsNoHostMount: once the view is built, the program's mount
// table holds the view and nothing else: no mount of the build root, of
// the host's root or of anything mounted under it (the host's tree is
// detached, not only out of sight), and the host's root directory is not
// reachable through any of them.
func TestViewHoldsNoHostMount(t *testing.T) {
	if !sandbox.Check().Has(sandbox.LayerFSView) {
		t.Fatal("the fs view layer is missing on this machine")
	}
	ws := newWorkspace(t)
	out, err := run(t, workspaceGrant(ws), ws, "/bin/cat", "/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("cat mountinfo: %v\n%s", err, out)
	}
	host, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	hostPoints := map[string]bool{}
	for _, l := range strings.Split(string(host), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] != "/" {
			hostPoints[f[4]] = true
		}
	}
	roots := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			t.Fatalf("bad mountinfo line %q", l)
		}
		point := f[4]
		switch {
		case point == "/":
			roots++
		case strings.HasPrefix(point, "/oldroot") || strings.HasPrefix(point, "/newroot"):
			t.Errorf("the sandbox still has a mount of the build at %s: %s", point, l)
		case hostPoints[point] && !strings.HasPrefix(point, "/proc") && !strings.HasPrefix(point, "/tmp") && !strings.HasPrefix(point, "/dev") &&
			!strings.HasPrefix(point, "/usr") && !strings.HasPrefix(point, "/etc") && !strings.HasPrefix(point, "/lib") && !strings.HasPrefix(point, ws):
			t.Errorf("the sandbox has a mount at %s, which the view does not make: %s", point, l)
		}
	}
	if roots != 1 {
		t.Errorf("the sandbox's mount table has %d mounts at /, want 1 (the view's root alone):\n%s", roots, out)
	}
}

// TestLauncherSurvivesSignals: the program sends every signal the Go
// runtime would end a process on to each thread of PID 1 (the launcher),
// first thing after its start. Only the launcher's thread that forked the
// program is in the program's Landlock domain (ABI 6 scopes signals to
// one's own; the other threads are in none), so at least those arrive;
// the launcher lives on and reports the program's own exit.
func TestLauncherSurvivesSignals(t *testing.T) {
	out, err := runAttack(t, `
import ctypes, os, platform, time
libc = ctypes.CDLL(None, use_errno=True)
tgkill = {"x86_64": 234, "aarch64": 131}[platform.machine()]
sent = 0
for tid in os.listdir("/proc/1/task"):
    # HUP INT QUIT ILL TRAP ABRT BUS FPE SEGV TERM STKFLT SYS
    for s in (1, 2, 3, 4, 5, 6, 7, 8, 11, 15, 16, 31):
        if libc.syscall(tgkill, 1, int(tid), s) == 0:
            sent += 1
time.sleep(0.2)
print("sent", sent)
print("done")
`)
	if err != nil {
		t.Fatalf("the launcher did not outlive the program's signals: %v\n%s", err, out)
	}
	if strings.Contains(out, "sent 0\n") {
		t.Fatalf("no signal reached the launcher, so this test proves nothing:\n%s", out)
	}
}

// TestViewCopiesGrantedFiles: the small read-only files the view copies
// onto its own tmpfs (the default grant's files of /etc) read inside the
// sandbox byte for byte as on the host, the largest ones included.
func TestViewCopiesGrantedFiles(t *testing.T) {
	if !sandbox.Check().Has(sandbox.LayerFSView) {
		t.Fatal("no file system view here")
	}
	ws := newWorkspace(t)
	var files []string
	var want []byte
	for _, r := range sandbox.SystemDirs() {
		st, err := os.Stat(r.Path)
		if err != nil || !st.Mode().IsRegular() || !strings.HasPrefix(r.Path, "/etc/") {
			continue
		}
		b, err := os.ReadFile(r.Path)
		if err != nil {
			continue // not readable here: not the point of this test
		}
		files = append(files, r.Path)
		want = append(want, b...)
	}
	if len(files) < 3 || len(want) < 8<<10 {
		t.Fatalf("too few granted files of /etc to check here: %q (%d bytes)", files, len(want))
	}
	out, err := run(t, workspaceGrant(ws), ws, append([]string{"cat"}, files...)...)
	if err != nil {
		t.Fatalf("cat %q: %v\n%s", files, err, out)
	}
	if out != string(want) {
		t.Fatalf("the sandbox reads %d bytes of %q, the host %d", len(out), files, len(want))
	}
}
