package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The cgroup v2 code is tested two ways. This machine is hybrid (its
// controllers are on v1), so memory.max and pids.max cannot be exercised
// on a real unified hierarchy here:
//
//   - against a fake cgroup v2 tree in a temporary directory (fakeMkdir
//     makes the interface files the kernel would), for the decisions, the
//     files written and the counters read, as root and, in a helper
//     process, as an unprivileged user with and without a delegated
//     subtree;
//   - on the real unified hierarchy (cgroup2_real_linux_test.go), with
//     whatever controller it offers, for what does not need memory or
//     pids: the kernel moving into its leaf under the real
//     no-internal-process rule, delegating the controller, the sandbox's
//     cgroup, the launcher moving a confined program into it, and the
//     cleanup.

// fakeMkdir is mkdir in a fake cgroup v2 tree: the new directory gets the
// interface files the kernel makes, for the controllers its parent's
// cgroup.subtree_control enables.
func fakeMkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return fakeFiles(dir)
}

// fakeFiles makes dir's interface files.
func fakeFiles(dir string) error {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"))
	var ctrl []string
	for _, f := range strings.Fields(string(b)) {
		if !strings.HasPrefix(f, "-") {
			ctrl = append(ctrl, strings.TrimPrefix(f, "+"))
		}
	}
	files := map[string]string{"cgroup.procs": "", "cgroup.controllers": strings.Join(ctrl, " ") + "\n",
		"cgroup.subtree_control": "", "cgroup.type": "domain\n", "cgroup.kill": "", "cgroup.events": "populated 0\nfrozen 0\n"}
	if slices.Contains(ctrl, "memory") {
		files["memory.max"], files["memory.swap.max"], files["memory.oom.group"] = "max\n", "max\n", "0\n"
		files["memory.events"], files["memory.peak"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n", "0\n"
	}
	if slices.Contains(ctrl, "pids") {
		files["pids.max"], files["pids.events"], files["pids.peak"] = "max\n", "max 0\n", "0\n"
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var fakeFS = cgroupFS{mkdir: fakeMkdir}

// fakeCgroup makes a cgroup of a fake tree at dir with the controllers its
// parent delegated to it and the processes in it. root makes the
// hierarchy's root, which has no cgroup.type.
func fakeCgroup(t *testing.T, dir, controllers string, root bool, procs ...int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	var p []string
	for _, n := range procs {
		p = append(p, strconv.Itoa(n))
	}
	mk := fakeMkdir
	if exists(dir) {
		mk = fakeFiles // a test's temporary directory as the root
	}
	if err := mk(dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "cgroup.controllers"), controllers+"\n")
	writeFile(t, filepath.Join(dir, "cgroup.procs"), strings.Join(p, "\n"))
	if root {
		if err := os.Remove(filepath.Join(dir, "cgroup.type")); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, name, v string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}

const fakePID = 4000

// TestPrepareUnified: the kernel's decisions on a v2 tree, and what it
// writes: where it makes the sandboxes' cgroups, whether it moves itself
// into a leaf first, which controllers it enables, and why not.
func TestPrepareUnified(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, root string) string // returns the kernel's own cgroup
		// want: base and leaf relative to root ("" none), moved, the
		// enabled controllers, subtree_control of the base afterwards.
		base, leaf, subtree string
		moved               bool
		enabled             []string
		why, missingMemory  []string // substrings
	}{
		{
			name: "alone in its cgroup",
			setup: func(t *testing.T, root string) string {
				fakeCgroup(t, root+"/app.scope", "cpu memory pids", false, fakePID)
				return root + "/app.scope"
			},
			base: "app.scope", leaf: "app.scope/kernel", moved: true, enabled: []string{"memory", "pids"}, subtree: "+memory +pids",
		},
		{
			name: "a leaf of an earlier kernel is reused",
			setup: func(t *testing.T, root string) string {
				fakeCgroup(t, root+"/app.scope", "memory pids", false, fakePID)
				fakeCgroup(t, root+"/app.scope/kernel", "", false)
				return root + "/app.scope"
			},
			base: "app.scope", leaf: "app.scope/kernel", moved: true, enabled: []string{"memory", "pids"}, subtree: "+memory +pids",
		},
		{
			name: "already in a leaf (DelegateSubgroup=kernel, or started by a kernel)",
			setup: func(t *testing.T, root string) string {
				fakeCgroup(t, root+"/svc.service", "memory pids", false)
				writeFile(t, root+"/svc.service/cgroup.subtree_control", "memory")
				fakeCgroup(t, root+"/svc.service/kernel", "memory", false, fakePID, fakePID+1)
				return root + "/svc.service/kernel"
			},
			base: "svc.service", leaf: "svc.service/kernel", enabled: []string{"memory", "pids"}, subtree: "+pids",
		},
		{
			name: "the hierarchy's root keeps its processes",
			setup: func(t *testing.T, root string) string {
				fakeCgroup(t, root, "memory pids", true, 1, 2, fakePID)
				return root
			},
			base: ".", enabled: []string{"memory", "pids"}, subtree: "+memory +pids",
		},
		{
			name: "other processes in its cgroup",
			setup: func(t *testing.T, root string) string {
				fakeCgroup(t, root+"/session-2.scope", "memory pids", false, 977, fakePID)
				return root + "/session-2.scope"
			},
			why: []string{"session-2.scope holds 1 other process(es) (pid 977)", "systemd-run --scope -p Delegate=yes"},
		},
		{
			name: "memory not delegated",
			setup: func(t *testing.T, root string) string {
				fakeCgroup(t, root+"/app.scope", "cpu pids", false, fakePID)
				return root + "/app.scope"
			},
			base: "app.scope", leaf: "app.scope/kernel", moved: true, enabled: []string{"pids"}, subtree: "+pids",
			missingMemory: []string{"the memory controller is not delegated to the kernel's cgroup", `cgroup.controllers: "cpu pids"`, "Delegate=yes"},
		},
		{
			name: "nothing delegated: nothing moved",
			setup: func(t *testing.T, root string) string {
				fakeCgroup(t, root+"/app.scope", "cpu io", false, fakePID)
				return root + "/app.scope"
			},
			why: []string{"the memory controller is not delegated", "Delegate=yes"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			own := c.setup(t, root)
			before := readFile(t, filepath.Join(own, "cgroup.subtree_control"))
			u := prepareUnified(fakeFS, own, []string{"memory", "pids"}, fakePID, 0)
			rel := func(p string) string {
				if p == "" {
					return ""
				}
				r, _ := filepath.Rel(root, p)
				return r
			}
			if rel(u.base) != c.base || rel(u.leaf) != c.leaf || u.moved != c.moved {
				t.Fatalf("base %q leaf %q moved %v, want %q %q %v (why: %s)", rel(u.base), rel(u.leaf), u.moved, c.base, c.leaf, c.moved, u.why)
			}
			var enabled []string
			for _, ctl := range []string{"memory", "pids"} {
				if u.enabled[ctl] {
					enabled = append(enabled, ctl)
				}
			}
			if !slices.Equal(enabled, c.enabled) {
				t.Errorf("enabled %v, want %v", enabled, c.enabled)
			}
			for _, w := range c.why {
				if !strings.Contains(u.why, w) {
					t.Errorf("why %q does not say %q", u.why, w)
				}
			}
			for _, w := range c.missingMemory {
				if !strings.Contains(u.missing["memory"], w) {
					t.Errorf("missing memory %q does not say %q", u.missing["memory"], w)
				}
			}
			if u.base == "" {
				// Refused: nothing moved, made or enabled.
				if exists(filepath.Join(own, leafName)) {
					t.Errorf("the kernel's leaf was made though it was refused")
				}
				if got := readFile(t, filepath.Join(own, "cgroup.subtree_control")); got != before {
					t.Errorf("subtree_control %q changed to %q though refused", before, got)
				}
				return
			}
			if got := readFile(t, filepath.Join(u.base, "cgroup.subtree_control")); got != c.subtree {
				t.Errorf("subtree_control %q, want %q", got, c.subtree)
			}
			if c.moved {
				if got := readFile(t, filepath.Join(u.leaf, "cgroup.procs")); got != strconv.Itoa(fakePID) {
					t.Errorf("the leaf's cgroup.procs holds %q, want the kernel's pid", got)
				}
			}
		})
	}
}

// TestMakeSandboxCgroupsV2: the sandbox's one cgroup on v2 gets memory_mb
// (memory.max, no swap, one OOM kill for all) and max_procs (pids.max),
// and the spec tells the launcher where and what.
func TestMakeSandboxCgroupsV2(t *testing.T) {
	root := t.TempDir()
	fakeCgroup(t, root, "memory pids", true)
	writeFile(t, root+"/cgroup.subtree_control", "memory pids")
	both := cgroupPlaces{memory: cgroupPlace{dir: root, v2: true}, pids: cgroupPlace{dir: root, v2: true}}
	t.Run("memory and pids", func(t *testing.T) {
		sp := spec{MemoryMB: 256, MaxProcs: 64}
		cg, err := makeSandboxCgroups(fakeFS, both, &sp, true)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Cgroup == "" || sp.Cgroup != cg.unified || !sp.CgroupMemory || !sp.CgroupPIDs || sp.MemoryCgroup != "" || sp.PIDsCgroup != "" {
			t.Fatalf("spec %+v, cgroups %+v", sp, cg)
		}
		if filepath.Dir(sp.Cgroup) != root || !strings.HasPrefix(filepath.Base(sp.Cgroup), fmt.Sprintf("agentkernel-%d-", os.Getpid())) {
			t.Errorf("cgroup %s is not agentkernel-<pid>-<n> in %s", sp.Cgroup, root)
		}
		for file, want := range map[string]string{"memory.max": strconv.Itoa(256 << 20), "memory.swap.max": "0", "memory.oom.group": "1", "pids.max": "64"} {
			if got := readFile(t, filepath.Join(sp.Cgroup, file)); got != want {
				t.Errorf("%s = %q, want %q", file, got, want)
			}
		}
	})
	t.Run("no swap accounting", func(t *testing.T) {
		noSwap := cgroupFS{mkdir: func(dir string) error {
			if err := fakeMkdir(dir); err != nil {
				return err
			}
			return os.Remove(filepath.Join(dir, "memory.swap.max"))
		}}
		sp := spec{MemoryMB: 128, MaxProcs: 64}
		if _, err := makeSandboxCgroups(noSwap, both, &sp, true); err != nil {
			t.Fatalf("a cgroup without memory.swap.max: %v", err)
		}
		if got := readFile(t, filepath.Join(sp.Cgroup, "memory.max")); got != strconv.Itoa(128<<20) {
			t.Errorf("memory.max %q", got)
		}
	})
	t.Run("root without a memory cgroup: pids only below the floor", func(t *testing.T) {
		pidsOnly := cgroupPlaces{memory: cgroupPlace{v2: true, why: "not delegated"}, pids: cgroupPlace{dir: root, v2: true}}
		sp := spec{Root: true, MemoryMB: 256, MaxProcs: 20}
		if _, err := makeSandboxCgroups(fakeFS, pidsOnly, &sp, false); err != nil {
			t.Fatal(err)
		}
		if !sp.CgroupPIDs || sp.CgroupMemory || readFile(t, filepath.Join(sp.Cgroup, "pids.max")) != "20" {
			t.Errorf("spec %+v", sp)
		}
		if got := readFile(t, filepath.Join(sp.Cgroup, "memory.max")); got != "max" {
			t.Errorf("memory.max %q written though memory_cgroup is allowed missing", got)
		}
		sp = spec{Root: true, MaxProcs: 1000}
		if cg, err := makeSandboxCgroups(fakeFS, pidsOnly, &sp, false); err != nil || cg.unified != "" || sp.Cgroup != "" {
			t.Errorf("max_procs above pid_max's floor needs no cgroup without memory: %+v %v", sp, err)
		}
	})
	t.Run("memory layer but no cgroup: an error, not a silent per-process limit", func(t *testing.T) {
		none := cgroupPlaces{memory: cgroupPlace{v2: true, why: "cgroup v2: the memory controller is not delegated"}}
		sp := spec{MemoryMB: 256}
		_, err := makeSandboxCgroups(fakeFS, none, &sp, true)
		if err == nil || !strings.Contains(err.Error(), "not delegated") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a leftover of a dead kernel is swept", func(t *testing.T) {
		dead := filepath.Join(root, "agentkernel-999999999-3")
		if err := os.Mkdir(dead, 0o755); err != nil { // empty: rmdir takes it, as on a cgroupfs
			t.Fatal(err)
		}
		sp := spec{MemoryMB: 64, MaxProcs: 8}
		if _, err := makeSandboxCgroups(fakeFS, both, &sp, true); err != nil {
			t.Fatal(err)
		}
		if exists(dead) {
			t.Errorf("%s of a dead kernel is still there", dead)
		}
	})
}

// TestUnifiedCounters: the launcher's v2 counters name the limit:
// memory.events' oom_kill names memory_mb, pids.events' max names
// max_procs; memory.events' max alone (page cache reaches memory.max too)
// names nothing.
func TestUnifiedCounters(t *testing.T) {
	root := t.TempDir()
	fakeCgroup(t, root, "memory pids", true)
	writeFile(t, root+"/cgroup.subtree_control", "memory pids")
	dir := root + "/agentkernel-1-1"
	if err := fakeMkdir(dir); err != nil {
		t.Fatal(err)
	}
	sp := &spec{Cgroup: dir, CgroupMemory: true, CgroupPIDs: true}
	lim := Grant{MemoryMB: 256, MaxProcs: 64}
	counts := func(memEvents, pidsEvents string) cgroupCounts {
		writeFile(t, dir+"/memory.events", memEvents)
		writeFile(t, dir+"/pids.events", pidsEvents)
		writeFile(t, dir+"/memory.peak", strconv.Itoa(256<<20))
		writeFile(t, dir+"/pids.peak", "64")
		c, err := openProgramCgroups(sp)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		if !c.moves() {
			t.Fatal("the launcher would not move the program into the v2 cgroup")
		}
		return c.counts()
	}
	n := counts("low 0\nhigh 0\nmax 412\noom 3\noom_kill 3\noom_group_kill 1\n", "max 0\n")
	if n.oomKills != 3 || n.memMax != 412 || n.memPeak != 256<<20 {
		t.Fatalf("counts %+v", n)
	}
	le := describeLimit(lim, observed{failed: true, cgroups: n})
	if le == nil || le.Limit != "memory_mb" || !strings.Contains(le.Detail, "reached 256 MiB") || !strings.Contains(le.Detail, "killed 3") {
		t.Fatalf("want memory_mb named with the peak and the kills: %v", le)
	}
	n = counts("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n", "max 17\n")
	if le := describeLimit(lim, observed{cgroups: n}); le == nil || le.Limit != "max_procs" || !strings.Contains(le.Detail, "17 times") {
		t.Fatalf("want max_procs named also for a program that exited 0: %v", le)
	}
	n = counts("low 0\nhigh 0\nmax 9000\noom 0\noom_kill 0\noom_group_kill 0\n", "max 0\n")
	if le := describeLimit(lim, observed{failed: true, cgroups: n}); le != nil {
		t.Fatalf("reclaim at memory.max alone named a limit: %v", le)
	}
	// A cgroup without memory.events is not a memory cgroup: refused.
	if err := os.Remove(dir + "/memory.events"); err != nil {
		t.Fatal(err)
	}
	if _, err := openProgramCgroups(sp); err == nil || !strings.Contains(err.Error(), "memory.events") {
		t.Fatalf("got %v", err)
	}
}

// TestFindCgroups: which version each controller uses. A hybrid machine
// (controllers on v1, a controller-less cgroup2 beside them, like the
// development VM) keeps v1; a v2-only machine uses the unified hierarchy;
// a process with neither is told so.
func TestFindCgroups(t *testing.T) {
	tmp := t.TempDir()
	for _, d := range []string{"memory/process_api/x", "pids"} {
		if err := os.MkdirAll(filepath.Join(tmp, "v1", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hybridSelf := "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/x\n0::/\n"
	hybridMounts := fmt.Sprintf("35 31 0:32 / %[1]s/v1/memory rw,relatime - cgroup cgroup rw,memory\n"+
		"39 31 0:36 / %[1]s/v1/pids rw,relatime - cgroup cgroup rw,pids\n"+
		"41 31 0:38 / %[1]s/unified rw,relatime - cgroup2 cgroup2 rw\n", tmp)
	p := findCgroups(fakeFS, hybridSelf, hybridMounts, fakePID, 0)
	if p.memory.v2 || p.memory.dir != tmp+"/v1/memory/process_api/x" || p.pids.v2 || p.pids.dir != tmp+"/v1/pids" {
		t.Fatalf("hybrid: %+v", p)
	}
	if r := p.report(); r.Version != 1 || !strings.Contains(r.String(), "v1") {
		t.Errorf("hybrid report %+v %s", r, r)
	}

	unifiedRoot := filepath.Join(tmp, "unified")
	fakeCgroup(t, unifiedRoot, "cpu io memory pids", true, 1)
	writeFile(t, unifiedRoot+"/cgroup.subtree_control", "cpu io memory pids")
	if err := fakeMkdir(unifiedRoot + "/user.slice"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, unifiedRoot+"/user.slice/cgroup.subtree_control", "memory pids")
	if err := fakeMkdir(unifiedRoot + "/user.slice/run-u7.scope"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, unifiedRoot+"/user.slice/run-u7.scope/cgroup.procs", strconv.Itoa(fakePID))
	v2Mounts := fmt.Sprintf("30 23 0:26 / %s rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", unifiedRoot)
	p = findCgroups(fakeFS, "0::/user.slice/run-u7.scope\n", v2Mounts, fakePID, 1000)
	scope := unifiedRoot + "/user.slice/run-u7.scope"
	if !p.memory.v2 || p.memory.dir != scope || !p.pids.v2 || p.pids.dir != scope || !p.moved || p.leaf != scope+"/kernel" {
		t.Fatalf("v2 only: %+v", p)
	}
	r := p.report()
	if r.Version != 2 || !strings.Contains(r.String(), "moved itself into "+scope+"/kernel") {
		t.Errorf("v2 report %+v: %s", r, r)
	}

	p = findCgroups(fakeFS, "", "", fakePID, 0)
	if p.memory.dir != "" || !strings.Contains(p.memory.why, "neither a cgroup v1 memory hierarchy nor cgroup v2") {
		t.Fatalf("none: %+v", p)
	}
	p = findCgroups(fakeFS, "0::/x\n", hybridMounts[:strings.Index(hybridMounts, "41 31")], fakePID, 0)
	if !strings.Contains(p.memory.why, "unified hierarchy is not mounted") {
		t.Fatalf("no cgroup2 mount: %+v", p)
	}
}

// TestMemoryCgroupMissingSaysWhatItMeans: the refusal names the layer, the
// fix and what allowing it missing leaves.
func TestMemoryCgroupMissingSaysWhatItMeans(t *testing.T) {
	err := (&MissingLayerError{Layer: LayerMemoryCgroup, Reason: "cgroup v2: the kernel's cgroup /user.slice/x is not writable by uid 1000 (...): it was not delegated to this user; " + delegateHint(1000)}).Error()
	for _, want := range []string{"layer memory_cgroup is missing", "systemd-run --user --scope -p Delegate=yes kernel", "allow_missing: [memory_cgroup]", "RLIMIT_AS"} {
		if !strings.Contains(err, want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// helperResult is what TestCgroup2Helper reports to the test that ran it.
type helperResult struct {
	Own, Base, Leaf string
	Moved           bool
	Enabled         []string
	Why             string
	Subtree         string
	LeafProcs       string
	BaseProcs       string
	Sandbox         string
	SandboxFiles    []string
	Output, Err     string
	Removed         bool
	SweptKilled     string
	ControlOutput   string
	LauncherFDs     []string
	FDErr           string
}

const cg2HelperEnv = "AGENTKERNEL_CG2_HELPER"

// runHelper runs TestCgroup2Helper in a child process with env, and
// returns what it reported.
func parseHelper(t *testing.T, out []byte, err error) helperResult {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		if j, ok := strings.CutPrefix(line, "cg2-result: "); ok {
			var r helperResult
			if err := json.Unmarshal([]byte(j), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("the helper reported nothing (%v):\n%s", err, out)
	return helperResult{}
}

func report(r helperResult) {
	b, _ := json.Marshal(r)
	fmt.Printf("\ncg2-result: %s\n", b)
}

// errString is err's text, "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
