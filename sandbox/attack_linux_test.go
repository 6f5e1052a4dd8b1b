package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	if os.Getenv(warmHelperEnv) != "" {
		warmHelper() // TestPrestartedDieWithKernel's stand-in for the kernel
	}
	os.Exit(m.Run())
}

// runAttackTests runs the attack tests again as subtests: under another
// launcher (TestDedicatedLauncher) or another start (TestPrestartedAttacks).
func runAttackTests(t *testing.T) {
	for name, f := range map[string]func(*testing.T){
		"Runs":               TestConfinedRuns,
		"EnvUnreachable":     TestKernelEnvironmentUnreachable,
		"WritesOutsideFail":  TestWritesOutsideGrantFail,
		"Network":            TestNetwork,
		"EscapedChildren":    TestEscapedChildrenDie,
		"Limits":             TestLimits,
		"HostUnixSockets":    TestHostUnixSocketsUnreachable,
		"LauncherOutOfReach": TestLauncherOutOfReach,
		"ProgramConfined":    TestProgramInheritsTheConfinedThread,
		"MemoryTogether":     TestMemoryBoundsTheSandbox,
		"ForkBomb":           TestForkBombNamed,
	} {
		t.Run(name, f)
	}
}

// command starts confined programs for the attack tests: sandbox.Command,
// or sandbox.CommandPrestarted under TestPrestartedAttacks.
var command = sandbox.Command

// workspaceGrant is run_command's default shape: ws rw, ws/.git ro, the
// system directories ro, nothing else.
func workspaceGrant(ws string) sandbox.Grant {
	fs := append(sandbox.SystemDirs(),
		sandbox.FSRule{Path: ws, Mode: "rw"},
		sandbox.FSRule{Path: filepath.Join(ws, ".git"), Mode: "ro", Optional: true})
	return sandbox.Grant{FS: fs}
}

// run runs argv confined and returns its combined output and Wait's error.
func run(t *testing.T, g sandbox.Grant, dir string, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, err := command(ctx, g, argv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + os.Getenv("HOME")}
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

func newWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestConfinedRuns(t *testing.T) {
	ws := newWorkspace(t)
	out, err := run(t, workspaceGrant(ws), ws, "sh", "-c", "echo hello > f && cat f && id -u")
	if err != nil {
		t.Fatalf("err %v, output %q", err, out)
	}
	if !strings.HasPrefix(out, "hello\n") {
		t.Fatalf("output %q", out)
	}
}

func TestKernelEnvironmentUnreachable(t *testing.T) {
	const secret = "sk-sandbox-test-7f3a9c"
	t.Setenv("AGENTKERNEL_TEST_SECRET", secret)
	ws := newWorkspace(t)
	out, _ := run(t, workspaceGrant(ws), ws, "sh", "-c",
		`echo ppid=$PPID; cat /proc/1/environ; cat /proc/$PPID/environ; tr '\0' '\n' < /proc/1/cmdline; ls /proc | grep -c '^[0-9]'; env`)
	if strings.Contains(out, secret) {
		t.Fatalf("the kernel's environment leaked into the sandbox:\n%s", out)
	}
	if !strings.Contains(out, "ppid=1\n") {
		t.Fatalf("the program's parent is not the sandbox's init (no PID namespace?):\n%s", out)
	}
	// The host's processes are not visible: only init, sh and its children.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if n, err := strconv.Atoi(l); err == nil && n > 6 {
			t.Fatalf("%d processes visible in the sandbox's /proc:\n%s", n, out)
		}
	}
}

func TestWritesOutsideGrantFail(t *testing.T) {
	ws := newWorkspace(t)
	outside := t.TempDir()
	marker := filepath.Join(outside, "pwned")
	out, _ := run(t, workspaceGrant(ws), ws, "sh", "-c",
		"echo x > "+marker+"; (cd / && echo x > "+marker+"); echo x > .git/config; echo x > .git/new; mv .git gone; rm -rf .git; echo ok > inside")
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a file was written outside the grant:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
		t.Fatalf(".git/config changed to %q:\n%s", b, out)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "new")); err == nil {
		t.Fatalf("a file was created in .git:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "inside")); string(b) != "ok\n" {
		t.Fatalf("the workspace write failed (%q):\n%s", b, out)
	}
	// Reading outside the grant fails too.
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cr3t"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = run(t, workspaceGrant(ws), ws, "cat", filepath.Join(outside, "secret"))
	if strings.Contains(out, "s3cr3t") {
		t.Fatalf("a file outside the grant was read: %q", out)
	}
}

func TestNetwork(t *testing.T) {
	port := int(sandboxtest.Listener(t))
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("needs /usr/bin/python3 for the TCP client")
	}
	client := fmt.Sprintf("import socket; s=socket.create_connection(('127.0.0.1', %d), timeout=5); print(s.recv(100).decode())", port)
	ws := newWorkspace(t)

	out, _ := run(t, workspaceGrant(ws), ws, py, "-c", client)
	if strings.Contains(out, "reached") {
		t.Fatalf("connected without a net grant:\n%s", out)
	}
	g := workspaceGrant(ws)
	g.Net = &sandbox.Net{Connect: []uint16{uint16(port)}}
	out, err = run(t, g, ws, py, "-c", client)
	if !strings.Contains(out, "reached") {
		t.Fatalf("no connection with the port granted (err %v):\n%s", err, out)
	}
	g.Net = &sandbox.Net{Connect: []uint16{uint16(port) + 1}}
	out, _ = run(t, g, ws, py, "-c", client)
	if strings.Contains(out, "reached") {
		t.Fatalf("connected to a port that was not granted:\n%s", out)
	}
}

// processesWith returns the pids of host processes whose command line
// contains s.
func processesWith(s string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestEscapedChildrenDie(t *testing.T) {
	ws := newWorkspace(t)
	const tag = "3017.5"
	out, err := run(t, workspaceGrant(ws), ws, "sh", "-c",
		"setsid sleep "+tag+" & (sleep "+tag+" &) ; nohup sleep "+tag+" >/dev/null 2>&1 & sleep 0.2; echo started")
	if err != nil || !strings.Contains(out, "started") {
		t.Fatalf("err %v, output %q", err, out)
	}
	if pids := processesWith("sleep\x00" + tag); len(pids) > 0 {
		t.Fatalf("processes started in the sandbox survive it: %v", pids)
	}
}

func TestLimits(t *testing.T) {
	ws := newWorkspace(t)
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	cases := []struct {
		name  string
		grant func(*sandbox.Grant)
		argv  []string
		limit string
	}{
		{"cpu spin", func(g *sandbox.Grant) { g.CPU = sandbox.Duration(time.Second) }, []string{"sh", "-c", "while :; do :; done"}, "cpu"},
		{"memory bomb", func(g *sandbox.Grant) { g.MemoryMB = 256 },
			[]string{py, "-c", "x=[]\nwhile True: x.append(bytearray(8<<20))"}, "memory_mb"},
		{"fork bomb", func(g *sandbox.Grant) { g.MaxProcs = 20 },
			[]string{"sh", "-c", "i=0; while [ $i -lt 400 ]; do sleep 600 & i=$((i+1)); done; exit 1"}, "max_procs"},
		{"wall clock", func(g *sandbox.Grant) { g.Timeout = sandbox.Duration(500 * time.Millisecond) }, []string{"sleep", "600"}, "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := workspaceGrant(ws)
			c.grant(&g)
			out, err := run(t, g, ws, c.argv...)
			var le *sandbox.LimitError
			if !errors.As(err, &le) {
				t.Fatalf("want a LimitError, got %v; output:\n%s", err, lastLines(out))
			}
			if le.Limit != c.limit {
				t.Fatalf("limit %s (%v), want %s", le.Limit, le, c.limit)
			}
			if !strings.Contains(le.Error(), c.limit) {
				t.Fatalf("the error does not name the limit: %v", le)
			}
			if c.limit == "max_procs" {
				// The bound is max_procs itself, also as root (a pids
				// cgroup), not the PID namespace's pid_max floor of ~299.
				m := regexp.MustCompile(`reached (\d+) processes`).FindStringSubmatch(le.Detail)
				if m == nil {
					t.Fatalf("the error does not say how many processes ran: %v", le)
				}
				n, _ := strconv.Atoi(m[1])
				t.Logf("%d processes ran under max_procs %d", n, g.MaxProcs)
				rep := sandbox.Check()
				exact, cgroup := !rep.Root, false
				for _, l := range rep.Layers {
					if l.Layer == sandbox.LayerPIDLimit && strings.Contains(l.Detail, "a pids cgroup per sandbox") {
						exact, cgroup = true, true
					}
				}
				switch {
				case n > g.MaxProcs+1 && cgroup: // the program's tasks, and the launcher
					t.Fatalf("%d processes ran under max_procs %d and a pids cgroup", n, g.MaxProcs)
				case n > g.MaxProcs+10 && exact:
					t.Fatalf("%d processes ran under max_procs %d", n, g.MaxProcs)
				case n > g.MaxProcs+10:
					t.Logf("%d processes under max_procs %d: root without a pids cgroup here, the bound is pid_max's floor", n, g.MaxProcs)
				}
			}
		})
	}
}

func lastLines(s string) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-6):], "\n")
}

func TestMissingLayerRefused(t *testing.T) {
	rep := sandbox.Check()
	for _, l := range rep.Layers {
		if !l.Active {
			t.Logf("layer %s missing here: %s", l.Layer, l.Detail)
		}
	}
	// A report without Landlock refuses a grant, naming the layer and the setting.
	fake := sandbox.Report{Layers: []sandbox.LayerStatus{{Layer: sandbox.LayerUserNS, Active: true}, {Layer: sandbox.LayerPIDNS, Active: true},
		{Layer: sandbox.LayerMountNS, Active: true}, {Layer: sandbox.LayerFSView, Active: true}, {Layer: sandbox.LayerNetNS, Active: true},
		{Layer: sandbox.LayerPIDLimit, Active: true}, {Layer: sandbox.LayerMemoryCgroup, Active: true}, {Layer: sandbox.LayerSeccomp, Active: true}}}
	err := fake.Missing(sandbox.Grant{})
	var me *sandbox.MissingLayerError
	if !errors.As(err, &me) || me.Layer != sandbox.LayerLandlock || !strings.Contains(err.Error(), "allow_missing: [landlock]") {
		t.Fatalf("got %v", err)
	}
	if err := fake.Missing(sandbox.Grant{AllowMissing: []sandbox.Layer{sandbox.LayerLandlock}}); err != nil {
		t.Fatalf("allow_missing did not accept the layer: %v", err)
	}
}

// TestHostInfoMasked is issue 36's sixth finding, third part: the host
// information files of /proc (and /sys where it is in the view) that
// container runtimes mask read as empty inside the sandbox: the kernel's
// keyrings (/proc/keys), its timers (/proc/timer_list), its memory image,
// scheduler state, ACPI and SCSI tables. The sandbox's uid 0 is the
// kernel user's (root here), so without the masks it reads them as the
// host's root does. The program cannot unmount a mask.
func TestHostInfoMasked(t *testing.T) {
	ws := newWorkspace(t)
	script := `for p in /proc/keys /proc/key-users /proc/timer_list /proc/sched_debug /proc/latency_stats /proc/timer_stats /proc/kcore /proc/interrupts; do
  [ -e $p ] && printf '%s %s\n' $p "$(head -c 4096 $p 2>/dev/null | wc -c)"
done
for d in /proc/acpi /proc/scsi /proc/asound; do [ -d $d ] && printf '%s %s\n' $d "$(ls -A $d | wc -l)"; done
umount /proc/keys 2>&1 | head -c 0; printf 'after umount %s\n' "$(head -c 4096 /proc/keys 2>/dev/null | wc -c)"`
	out, err := run(t, workspaceGrant(ws), ws, "sh", "-c", script)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		seen++
		if f[len(f)-1] != "0" {
			t.Errorf("%s is readable in the sandbox: %s", f[0], line)
		}
	}
	// /proc/keys and /proc/timer_list exist on every kernel this runs on,
	// with content on the host: the test checks something.
	for _, want := range []string{"/proc/keys ", "/proc/timer_list ", "after umount "} {
		if !strings.Contains(out, want) {
			t.Errorf("the sandbox did not report %q:\n%s", want, out)
		}
	}
	if seen < 3 {
		t.Fatalf("only %d paths checked:\n%s", seen, out)
	}
}
