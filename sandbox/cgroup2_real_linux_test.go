package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The helper: these tests run TestCgroup2Helper in a child process (the
// test binary again), placed in a cgroup of the test's own or running as
// another user, since the code under test moves its own process.

// TestCgroup2Helper is the child's side; without the environment variable
// it does nothing.
func TestCgroup2Helper(t *testing.T) {
	mode := os.Getenv(cg2HelperEnv)
	if mode == "" {
		return
	}
	var r helperResult
	defer func() { report(r) }()
	pid := os.Getpid()
	switch mode {
	case "fake":
		// Against the fake tree at AGENTKERNEL_CG2_OWN, as whoever runs it.
		own := os.Getenv("AGENTKERNEL_CG2_OWN")
		u := prepareUnified(fakeFS, own, []string{"memory", "pids"}, pid, os.Geteuid())
		r.fill(u)
		return
	case "real":
	default:
		r.Why = "unknown mode " + mode
		return
	}
	// On the real unified hierarchy: this process was cloned into the
	// test's cgroup.
	self, _ := os.ReadFile("/proc/self/cgroup")
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	own, _ := cgroupDir(string(mi), "cgroup2", "", parseProcCgroup(string(self)).v2)
	r.Own, r.Base = own, own
	if want := os.Getenv("AGENTKERNEL_CG2_WANT"); want != "" {
		u := prepareUnified(cgroupFS{}, own, []string{want}, pid, os.Geteuid())
		r.fill(u)
		if u.base == "" {
			return
		}
	}
	if os.Getenv("AGENTKERNEL_CG2_BUSY") != "" {
		return
	}
	// A leftover of a kernel that died, with a survivor in it.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		r.Err = err.Error()
		return
	}
	leftover := filepath.Join(r.Base, fmt.Sprintf("%s%d-1", cgroupPrefix, dead.Process.Pid))
	survivor, err := startInCgroup(leftover, "sleep", "600")
	if err != nil {
		r.Err = err.Error()
		return
	}
	d, err := cgroupFS{}.makeCgroup(r.Base, true, nil)
	if err != nil {
		r.Err = err.Error()
		return
	}
	r.Sandbox = d
	r.SweptKilled = errString(survivor.Wait())
	if exists(leftover) {
		r.SweptKilled += "; the leftover is still there"
	}
	ents, _ := os.ReadDir(d)
	for _, e := range ents {
		r.SandboxFiles = append(r.SandboxFiles, e.Name())
	}
	// A confined program, moved into the sandbox's cgroup by the
	// launcher, tries to leave it by writing itself ("0") into the
	// cgroup.procs of the kernel's cgroups, then says where it is; the
	// same again with those granted rw, the control: there it leaves.
	var escape []string
	for _, dir := range []string{r.Base, r.Leaf} {
		if dir != "" {
			escape = append(escape, filepath.Join(dir, "cgroup.procs"))
		}
	}
	script := `for f in "$@"; do { echo 0 > "$f"; } 2>/dev/null && echo "left through $f"; done; cat /proc/self/cgroup`
	argv := append([]string{"sh", "-c", script, "sh"}, escape...)
	g := Grant{FS: SystemDirs(), AllowMissing: []Layer{LayerMemoryCgroup}}
	r.Output, r.Err = runConfined(d, g, argv)
	removeCgroup(d, true)
	r.Removed = !exists(d)
	g.FS = append(g.FS, FSRule{Path: r.Base, Mode: "rw"})
	if d, err = (cgroupFS{}).makeCgroup(r.Base, true, nil); err == nil {
		r.ControlOutput, _ = runConfined(d, g, argv)
		removeCgroup(d, true)
	}
	// While the program runs, the launcher holds nothing of the
	// cgroup file system open for writing.
	if d, err = (cgroupFS{}).makeCgroup(r.Base, true, nil); err == nil {
		r.LauncherFDs, r.FDErr = launcherFDsWhileRunning(d)
		removeCgroup(d, true)
	}
}

// runConfined runs argv confined by g with its cgroup v2 d.
func runConfined(d string, g Grant, argv []string) (string, string) {
	sp, netns, rep, err := buildSpec(g, argv)
	if err != nil {
		return "", err.Error()
	}
	sp.Cgroup = d
	c, err := newLauncherCmd(context.Background(), sp, netns, rep)
	if err != nil {
		return "", err.Error()
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err = c.Run()
	return out.String(), errString(err)
}

// launcherFDsWhileRunning starts a program in cgroup d that waits on its
// stdin once it runs, and lists where the launcher's descriptors lead
// (the helper runs as root: the launcher's being non-dumpable does not
// keep it out).
func launcherFDsWhileRunning(d string) ([]string, string) {
	g := Grant{FS: SystemDirs(), AllowMissing: []Layer{LayerMemoryCgroup}}
	sp, netns, rep, err := buildSpec(g, []string{"sh", "-c", "echo running; read x"})
	if err != nil {
		return nil, err.Error()
	}
	sp.Cgroup = d
	c, err := newLauncherCmd(context.Background(), sp, netns, rep)
	if err != nil {
		return nil, err.Error()
	}
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err.Error()
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err.Error()
	}
	if err := c.Start(); err != nil {
		return nil, err.Error()
	}
	defer func() { in.Close(); _ = c.Wait() }()
	buf := make([]byte, 8)
	if n, err := out.Read(buf); err != nil || string(buf[:n]) != "running\n" {
		return nil, fmt.Sprintf("the program did not start: %q %v", buf[:n], err)
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", c.Process.Pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, err.Error()
	}
	var links []string
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil {
			links = append(links, l)
		}
	}
	return links, ""
}

func (r *helperResult) fill(u unified) {
	r.Base, r.Leaf, r.Moved, r.Why = u.base, u.leaf, u.moved, u.why
	for _, c := range []string{"memory", "pids", "hugetlb", "cpu", "io", "cpuset", "rdma", "misc"} {
		if u.enabled[c] {
			r.Enabled = append(r.Enabled, c)
		}
	}
	if u.base != "" {
		b, _ := os.ReadFile(filepath.Join(u.base, "cgroup.subtree_control"))
		r.Subtree = strings.TrimSpace(string(b))
		b, _ = os.ReadFile(filepath.Join(u.base, "cgroup.procs"))
		r.BaseProcs = strings.TrimSpace(string(b))
	}
	if u.leaf != "" {
		b, _ := os.ReadFile(filepath.Join(u.leaf, "cgroup.procs"))
		r.LeafProcs = strings.TrimSpace(string(b))
	}
}

// startInCgroup makes the cgroup dir and starts argv in it: cloned into it
// (clone3 with CLONE_INTO_CGROUP, Linux 5.7+).
func startInCgroup(dir string, argv ...string) (*exec.Cmd, error) {
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, err
	}
	fd, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	return cmd, cmd.Start()
}

// runHelper runs TestCgroup2Helper with env, as cred's user when set,
// cloned into the cgroup dir when set.
func runHelper(t *testing.T, dir string, cred *syscall.Credential, env ...string) (helperResult, int) {
	t.Helper()
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestCgroup2Helper$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if dir != "" {
		fd, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(fd.Fd())
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the helper: %v", err)
	}
	err := cmd.Wait()
	return parseHelper(t, out.Bytes(), err), cmd.Process.Pid
}

// TestPrepareUnifiedAsUser: a user without a delegated subtree is told how
// to get one; with one (the cgroup and its cgroup.procs and
// cgroup.subtree_control owned by the user, as systemd's Delegate=yes
// leaves them) the kernel moves itself into its leaf and enables the
// controllers. Run as uid 65534 against a fake tree, so the permission
// checks are the kernel's.
func TestPrepareUnifiedAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a helper as another user")
	}
	const nobody = 65534
	tmp := t.TempDir()
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cred := &syscall.Credential{Uid: nobody, Gid: nobody}
	t.Run("not delegated", func(t *testing.T) {
		own := filepath.Join(tmp, "a", "session-2.scope")
		fakeCgroup(t, own, "memory pids", false)
		r, _ := runHelper(t, "", cred, cg2HelperEnv+"=fake", "AGENTKERNEL_CG2_OWN="+own)
		for _, want := range []string{"is not writable by uid 65534", "permission denied", "systemd-run --user --scope -p Delegate=yes kernel"} {
			if !strings.Contains(r.Why, want) {
				t.Errorf("why %q does not say %q", r.Why, want)
			}
		}
		if r.Moved || exists(filepath.Join(own, leafName)) {
			t.Errorf("moved into a leaf though refused: %+v", r)
		}
	})
	t.Run("delegated", func(t *testing.T) {
		own := filepath.Join(tmp, "b", "run-u7.scope")
		fakeCgroup(t, own, "memory pids", false)
		for _, p := range []string{own, own + "/cgroup.procs", own + "/cgroup.subtree_control"} {
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
		r, pid := runHelper(t, "", cred, cg2HelperEnv+"=fake", "AGENTKERNEL_CG2_OWN="+own)
		if r.Why != "" || !r.Moved || r.Base != own || r.Leaf != own+"/kernel" || !slices.Equal(r.Enabled, []string{"memory", "pids"}) {
			t.Fatalf("%+v", r)
		}
		if r.LeafProcs != strconv.Itoa(pid) || r.Subtree != "+memory +pids" {
			t.Errorf("leaf procs %q (helper %d), subtree_control %q", r.LeafProcs, pid, r.Subtree)
		}
	})
}

// unifiedCgroup is this process's cgroup on the unified hierarchy: its
// directory and its path there.
func unifiedCgroup(t testing.TB) (dir, path string) {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	pc := parseProcCgroup(string(self))
	dir, ok := cgroupDir(string(mi), "cgroup2", "", pc.v2)
	if !pc.hasV2 || !ok {
		t.Fatalf("this process has no cgroup on a mounted unified hierarchy:\n%s", self)
	}
	return dir, pc.v2
}

var testCgroupSeq int

// testCgroup makes a cgroup for one test under this process's own on the
// unified hierarchy, and picks a controller it can delegate further: one
// its parent already gives its children, or at the hierarchy's root one
// the root offers, which the test then enables for the root's children
// and leaves so (systemd enables every controller there; another run of
// this test may rely on it). "" when there is none: the test then
// exercises the placement without a controller.
func testCgroup(t testing.TB) (dir, path, ctrl string) {
	t.Helper()
	own, ownPath := unifiedCgroup(t)
	on := strings.Fields(readFile(t, own+"/cgroup.subtree_control"))
	if len(on) == 0 && !exists(own+"/cgroup.type") {
		if avail := strings.Fields(readFile(t, own+"/cgroup.controllers")); len(avail) > 0 {
			pick := pickController(avail)
			if err := writeCgroupFile(own+"/cgroup.subtree_control", "+"+pick); err != nil {
				t.Fatalf("enable %s for the root's children: %v", pick, err)
			}
			on = []string{pick}
		}
	}
	if len(on) > 0 {
		ctrl = pickController(on)
	}
	testCgroupSeq++
	name := fmt.Sprintf("cg2test-%d-%d", os.Getpid(), testCgroupSeq)
	dir = filepath.Join(own, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make a cgroup on the unified hierarchy: %v", err)
	}
	t.Cleanup(func() { removeTree(dir) })
	return dir, filepath.Join(ownPath, name), ctrl
}

func pickController(c []string) string {
	for _, p := range []string{"memory", "pids"} {
		if slices.Contains(c, p) {
			return p
		}
	}
	return c[0]
}

// removeTree removes a cgroup and its children, killing what is in them.
func removeTree(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	removeCgroup(dir, true)
}

// TestUnifiedForReal: on the real unified hierarchy, the kernel (the
// helper, cloned into a cgroup of the test's with CLONE_INTO_CGROUP) moves
// itself into its leaf and delegates a controller to its siblings under
// the kernel's no-internal-process rule; a dead kernel's leftover is
// killed and removed; the launcher moves a confined program (user, PID
// and mount namespaces, the view, Landlock, seccomp) into the sandbox's
// cgroup before its first instruction, where the program sees itself; the
// cgroup is removed after. Memory and pids are not on this machine's
// unified hierarchy, so the controller is whichever it offers.
func TestUnifiedForReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups on the unified hierarchy")
	}
	dir, path, ctrl := testCgroup(t)
	t.Logf("test cgroup %s, controller %q", dir, ctrl)
	env := []string{cg2HelperEnv + "=real"}
	if ctrl != "" {
		env = append(env, "AGENTKERNEL_CG2_WANT="+ctrl)
	}
	r, pid := runHelper(t, dir, nil, env...)
	if r.Own != dir {
		t.Fatalf("the helper runs in %q, not in the cgroup it was cloned into (%s): %+v", r.Own, dir, r)
	}
	if ctrl != "" {
		if r.Why != "" || !r.Moved || r.Base != dir || r.Leaf != dir+"/kernel" || !slices.Equal(r.Enabled, []string{ctrl}) {
			t.Fatalf("prepare: %+v", r)
		}
		if r.LeafProcs != strconv.Itoa(pid) || r.BaseProcs != "" || !slices.Contains(strings.Fields(r.Subtree), ctrl) {
			t.Errorf("the kernel is not alone in its leaf, or the base is not empty and delegating %s: leaf %q base %q subtree_control %q", ctrl, r.LeafProcs, r.BaseProcs, r.Subtree)
		}
		if !slices.ContainsFunc(r.SandboxFiles, func(f string) bool { return strings.HasPrefix(f, ctrl+".") }) {
			t.Errorf("the sandbox's cgroup has no %s files: %v", ctrl, r.SandboxFiles)
		}
	}
	if !strings.Contains(r.SweptKilled, "killed") || strings.Contains(r.SweptKilled, "still there") {
		t.Errorf("a dead kernel's leftover: its survivor %q", r.SweptKilled)
	}
	want := fmt.Sprintf("0::%s/%s%d-", path, cgroupPrefix, pid)
	if r.Err != "" || !strings.Contains(r.Output, want) || strings.Contains(r.Output, "left through") {
		t.Fatalf("the confined program is not in the sandbox's cgroup, or left it (want a line %s...): err %q, output:\n%s", want, r.Err, r.Output)
	}
	if !strings.Contains(r.ControlOutput, "left through") || strings.Contains(r.ControlOutput, want) {
		t.Errorf("the control (the kernel's cgroups granted rw) did not leave the sandbox's cgroup, so the attack proves nothing:\n%s", r.ControlOutput)
	}
	if !r.Removed {
		t.Errorf("the sandbox's cgroup %s is still there", r.Sandbox)
	}
	if r.FDErr != "" || len(r.LauncherFDs) == 0 {
		t.Fatalf("the launcher's descriptors: %v %s", r.LauncherFDs, r.FDErr)
	}
	for _, l := range r.LauncherFDs {
		if strings.HasSuffix(l, "/cgroup.procs") {
			t.Errorf("the launcher holds %s open while the program runs: %v", l, r.LauncherFDs)
		}
	}
	t.Logf("the launcher's descriptors while the program runs: %v", r.LauncherFDs)
}

// TestUnifiedBusyForReal: a kernel that shares its cgroup with another
// process moves nothing and says why, naming that process and the fix.
func TestUnifiedBusyForReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups on the unified hierarchy")
	}
	dir, _, ctrl := testCgroup(t)
	if ctrl == "" {
		t.Skip("the unified hierarchy here offers no controller, so nothing needs the kernel alone in its cgroup")
	}
	other, err := startInCgroup(dir, "sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	r, _ := runHelper(t, dir, nil, cg2HelperEnv+"=real", "AGENTKERNEL_CG2_WANT="+ctrl, "AGENTKERNEL_CG2_BUSY=1")
	for _, want := range []string{"holds 1 other process(es) (pid " + strconv.Itoa(other.Process.Pid) + ")", "systemd-run --scope -p Delegate=yes"} {
		if !strings.Contains(r.Why, want) {
			t.Errorf("why %q does not say %q", r.Why, want)
		}
	}
	if r.Moved || exists(dir+"/kernel") {
		t.Errorf("moved though refused: %+v", r)
	}
	if s := readFile(t, dir+"/cgroup.subtree_control"); s != "" {
		t.Errorf("subtree_control %q set though refused", s)
	}
}

// BenchmarkTrueConfinedUnified is BenchmarkTrueConfined (the host's v1
// cgroups, a cold launcher) plus what a v2 machine adds: a cgroup made
// and removed on the unified hierarchy, and the program started traced
// for one stop at its execve, where the launcher moves it in. Compare
// with BenchmarkTrueConfined.
func BenchmarkTrueConfinedUnified(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to make cgroups on the unified hierarchy")
	}
	dir, _, _ := testCgroup(b)
	g := Grant{FS: SystemDirs()}
	Check()
	var d []time.Duration
	for b.Loop() {
		start := time.Now()
		sp, netns, rep, err := buildSpec(g, []string{"/bin/true"})
		if err != nil {
			b.Fatal(err)
		}
		cg, err := newSandboxCgroups(&sp, rep.Has(LayerMemoryCgroup))
		if err != nil {
			b.Fatal(err)
		}
		if sp.Cgroup, err = (cgroupFS{}).makeCgroup(dir, true, nil); err != nil {
			b.Fatal(err)
		}
		c, err := newLauncherCmd(context.Background(), sp, netns, rep)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
		cg.remove()
		removeCgroup(sp.Cgroup, true)
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2])/1e6, "p50-ms")
}
