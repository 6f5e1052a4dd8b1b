package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// mainCalled is set by Main: without it a re-executed binary would run its
// own main instead of the launcher.
var mainCalled atomic.Bool

// ErrNoMain is returned by Command when Main was not called first in the
// binary's main (or the test binary's TestMain).
var ErrNoMain = errors.New("sandbox: sandbox.Main() was not called first in main (or TestMain): the launcher cannot run")

// Cmd is a program that runs confined. It embeds the *exec.Cmd that
// starts the launcher; set Env, Dir, Stdin, Stdout and Stderr on it as
// usual (Env starts empty, never the kernel's). Use Start, Wait and Run of
// Cmd, not of the embedded exec.Cmd, to get the outcome and close the
// launcher's descriptors; code that only has the *exec.Cmd (go-plugin's
// ClientConfig.Cmd) still gets a confined process, and the descriptors are
// closed by their finalizers.
//
// A Cmd is not safe for concurrent use.
type Cmd struct {
	*exec.Cmd
	// Thread, when set, runs a cold start's fork (its argument) on a
	// thread of the caller's choosing: the launcher's parent-death signal
	// fires when that thread ends. By default the fork runs on the
	// package's own thread, which lives as long as the process. The
	// calling goroutine's thread would not do: when the runtime retires
	// it (a goroutine that locked it returned), the launcher dies with
	// it, mid-run ("sandbox launcher killed").
	Thread    func(fork func() error) error
	status    *os.File
	childEnds []*os.File
	outcome   Outcome
	collected bool

	// What a pre-started Start needs (CommandPrestarted).
	prestarted bool
	ctx        context.Context
	sp         spec
	netns      bool
	rep        Report
	copying    sync.WaitGroup
	readEnds   []*os.File
	waitDelay  time.Duration
	stopCancel func() bool
	warmed     bool
	poolKey    string
	// cgroups are the sandbox's, removed once the launcher is gone.
	cgroups *sandboxCgroups
}

// Command returns a Cmd that runs argv confined by g. argv[0] is looked up
// in the PATH of the Cmd's Env when it has no slash. The process starts in
// new user, PID, mount and (without net) network namespaces, with g's
// rlimits, no_new_privs, no capabilities and g's Landlock rules; the
// launcher stays as PID 1 and when the program exits everything it
// started is killed.
//
// Command fails with a *MissingLayerError when a layer g needs is missing
// here and g.AllowMissing does not name it, and with ErrNoMain when Main
// was not called. ctx kills the launcher (and so everything) when done.
func Command(ctx context.Context, g Grant, argv []string) (*Cmd, error) {
	sp, netns, rep, err := buildSpec(g, argv)
	countSetup(err)
	if err != nil {
		return nil, err
	}
	return newCmd(ctx, sp, netns, rep)
}

// CommandPrestarted is Command for short programs run often (run_command,
// command hooks): Start hands the program to a launcher started and
// confined ahead of time for the same grant, and the next one is started
// after Wait. That takes a few milliseconds where a cold start takes tens.
// Use the Cmd's own Start, Run and Wait (its exec.Cmd cannot be started
// by itself). After Start the embedded exec.Cmd is the launcher's, whose
// Process is the sandbox's PID 1 as in a cold start; Wait returns once the
// program and everything it started are dead, and reaps the launcher in
// the background (do not wait on Process yourself). A non-zero exit is an
// *ExitError.
func CommandPrestarted(ctx context.Context, g Grant, argv []string) (*Cmd, error) {
	sp, netns, rep, err := buildSpec(g, argv)
	countSetup(err)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Env: []string{}}
	return &Cmd{Cmd: cmd, prestarted: true, ctx: ctx, sp: sp, netns: netns, rep: rep}, nil
}

// buildSpec checks g against this machine and resolves it into the
// launcher's spec.
func buildSpec(g Grant, argv []string) (spec, bool, Report, error) {
	if len(argv) == 0 || argv[0] == "" {
		return spec{}, false, Report{}, errors.New("sandbox: empty argv")
	}
	if err := g.Validate(); err != nil {
		return spec{}, false, Report{}, err
	}
	if !mainCalled.Load() {
		return spec{}, false, Report{}, ErrNoMain
	}
	rep := cachedCheck()
	if err := rep.Missing(g); err != nil {
		return spec{}, false, rep, err
	}
	lim := g.limits()
	sp := spec{
		Argv: argv, Net: g.Net, HostPATH: os.Getenv("PATH"),
		MountNS:     rep.Has(LayerMountNS),
		FSView:      rep.Has(LayerMountNS) && rep.Has(LayerFSView),
		Seccomp:     rep.Has(LayerSeccomp),
		LandlockABI: rep.LandlockABI,
		Root:        rep.Root,
		MemoryMB:    lim.MemoryMB, MaxProcs: lim.MaxProcs, MaxFileMB: lim.MaxFileMB, MaxOpenFiles: lim.MaxOpenFiles,
		CPUSeconds: int((g.CPU.D() + time.Second - 1) / time.Second),
		TimeoutNS:  int64(g.Timeout),
	}
	rules, bindRO, err := resolveRules(g.FS)
	if err != nil {
		return spec{}, false, rep, err
	}
	sp.Rules, sp.BindRO = rules, bindRO
	if len(bindRO) > 0 && !sp.MountNS {
		// The nested ro rule cannot be enforced without a mount namespace:
		// Landlock rules only add rights.
		if !slices.Contains(g.AllowMissing, LayerMountNS) {
			return spec{}, false, rep, &MissingLayerError{Layer: LayerMountNS, Reason: "needed to make " + bindRO[0] + " read-only inside an rw grant"}
		}
	}
	return sp, g.Net == nil && rep.Has(LayerNetNS), rep, nil
}

func newCmd(ctx context.Context, sp spec, netns bool, rep Report) (*Cmd, error) {
	var cg *sandboxCgroups
	if !sp.Probe {
		var err error
		if cg, err = newSandboxCgroups(&sp, rep.Has(LayerMemoryCgroup)); err != nil {
			return nil, err
		}
	}
	c, err := newLauncherCmd(ctx, sp, netns, rep)
	if err != nil {
		cg.remove()
		return nil, err
	}
	c.cgroups = cg
	return c, nil
}

// pidMaxFloor is the smallest max_procs a PID namespace's pid_max (at
// least 301, minus the launcher and one spare) enforces by itself.
const pidMaxFloor = 299

func newLauncherCmd(ctx context.Context, sp spec, netns bool, rep Report) (*Cmd, error) {
	b := sp.encode()
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: spec pipe: %w", err)
	}
	if len(b) > 60<<10 {
		specR.Close()
		specW.Close()
		return nil, errors.New("sandbox: the grant is too large")
	}
	_, err = specW.Write(b)
	specW.Close()
	if err != nil {
		specR.Close()
		return nil, fmt.Errorf("sandbox: write spec: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		specR.Close()
		return nil, fmt.Errorf("sandbox: status pipe: %w", err)
	}
	cmd := exec.CommandContext(ctx, currentLauncher().path)
	cmd.Args = []string{initArg0, launcherProto}
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{specR, statusW}
	cmd.SysProcAttr = sysProcAttr(rep, netns)
	// The launcher dies with the thread that started it; callers that
	// need that (plugins) start it from a thread that lives as long as
	// they do.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.WaitDelay = 2 * time.Second
	return &Cmd{Cmd: cmd, status: statusR, childEnds: []*os.File{specR, statusW},
		ctx: ctx, sp: sp, netns: netns, rep: rep}, nil
}

// sysProcAttr is the launcher's clone: its own process group and the
// namespaces this machine offers.
func sysProcAttr(rep Report, netns bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if rep.Has(LayerPIDNS) {
		a.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC
	}
	if rep.Has(LayerMountNS) {
		a.Cloneflags |= syscall.CLONE_NEWNS
	}
	if netns {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
	if rep.Has(LayerUserNS) {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
	return a
}

// resolveRules checks every fs rule against the file system: absolute,
// existing (optional ones are dropped when missing), directory or file.
// It returns the ro rules that sit inside an rw rule, for bind mounts.
func resolveRules(fs []FSRule) ([]specRule, []string, error) {
	var out []specRule
	for i, r := range fs {
		p := filepath.Clean(r.Path)
		st, err := os.Stat(p)
		if err != nil {
			if r.Optional && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, nil, &GrantError{Field: fmt.Sprintf("fs[%d].path", i), Msg: err.Error()}
		}
		sr := specRule{Path: p, RW: r.Writable(), Dir: st.IsDir()}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			sr.dev, sr.ino = sys.Dev, sys.Ino
		}
		out = append(out, sr)
	}
	var bind []string
	for _, r := range out {
		if r.RW {
			continue
		}
		for _, w := range out {
			if w.RW && w.Path != r.Path && within(r.Path, w.Path) {
				bind = append(bind, r.Path)
				break
			}
		}
	}
	return out, bind, nil
}

// Start starts the launcher and closes the host's copies of its
// descriptors; a Prestarted Cmd hands the program to a ready launcher.
func (c *Cmd) Start() error {
	if c.prestarted {
		if thePrestartN() > 0 {
			if err := c.startPrestarted(); err != nil {
				return err
			}
			c.warmed = true
			return nil
		}
		// Pre-starting is off: a cold start with the caller's settings.
		cold, err := newCmd(c.ctx, c.sp, c.netns, c.rep)
		if err != nil {
			return err
		}
		cold.Dir, cold.Env, cold.WaitDelay = c.Dir, c.Env, c.Cmd.WaitDelay
		cold.Stdin, cold.Stdout, cold.Stderr = c.Stdin, c.Stdout, c.Stderr
		c.Cmd, c.status, c.childEnds, c.cgroups, c.prestarted = cold.Cmd, cold.status, cold.childEnds, cold.cgroups, false
	}
	c.Cmd.Env = launcherEnv(c.Cmd.Env)
	var err error
	if c.Thread != nil {
		err = c.Thread(c.Cmd.Start)
	} else {
		thePool.onSpawner(func() { err = c.Cmd.Start() })
	}
	for _, f := range c.childEnds {
		f.Close()
	}
	c.childEnds = nil
	if err != nil {
		c.status.Close()
	}
	return err
}

// Wait waits for the launcher (so for every process of the sandbox) and
// collects the outcome. A limit that stopped the program is returned as a
// *LimitError, a launch failure (a path outside the grant, a missing
// program) as an error saying so; otherwise the *exec.ExitError of the
// launcher, whose exit code is the program's.
func (c *Cmd) Wait() error {
	if c.warmed {
		return c.waitPrestarted()
	}
	err := c.Cmd.Wait()
	c.cgroups.remove()
	c.collect()
	countLimit(c.outcome.Limit)
	switch {
	case c.outcome.Known && !c.outcome.agrees(c.ProcessState):
		// The launcher exits with the program's status, which the kernel
		// reports here: a report that says otherwise was not the
		// launcher's (it is out of the program's reach; this is the
		// second check).
		err := fmt.Errorf("sandbox: the report (%s) disagrees with the launcher's exit status (%v); the report is ignored", c.outcome, c.ProcessState)
		c.outcome = Outcome{}
		return err
	case c.outcome.Limit != nil:
		return c.outcome.Limit
	case c.outcome.Err != "":
		return fmt.Errorf("sandbox: %s", c.outcome.Err)
	case err == nil && !c.outcome.Known:
		return errors.New("sandbox: the launcher exited without reporting how the program ended (is it agentkernel's launcher?)")
	}
	return err
}

// agrees reports whether o is what a launcher that exited with ps would
// have reported: the program's exit code, or 128 plus its signal.
func (o Outcome) agrees(ps *os.ProcessState) bool {
	if ps == nil || o.Err != "" {
		return true // not started, or killed before reporting
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Exited() {
		return true // the launcher was killed from outside after reporting
	}
	if o.Exited {
		return ws.ExitStatus() == o.ExitCode
	}
	return ws.ExitStatus() >= 128
}

// Run starts and waits.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Outcome is how the program ended. Call it once the launcher has exited
// (after Wait, or after waiting on c.Process directly).
func (c *Cmd) Outcome() Outcome {
	c.collect()
	return c.outcome
}

func (c *Cmd) collect() {
	if c.collected {
		return
	}
	c.collected = true
	if c.stopCancel != nil {
		c.stopCancel()
	}
	defer c.status.Close()
	_ = c.status.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	buf := make([]byte, 8192)
	n, _ := c.status.Read(buf)
	if n > 0 && json.Unmarshal(buf[:n], &c.outcome) == nil {
		c.outcome.Known = true
	}
}

var (
	checkOnce sync.Once
	checkRep  Report
)

func cachedCheck() Report {
	checkOnce.Do(func() { checkRep = probe() })
	return checkRep
}

// Check reports which layers hold on this machine. It launches a probe
// through the launcher once per process and caches the answer. Main must
// have been called.
func Check() Report { return cachedCheck() }

// probe finds the layers by trying them: the namespaces by starting the
// launcher in probe mode with them, Landlock by asking the kernel.
func probe() Report {
	rep := Report{Root: os.Geteuid() == 0, Launcher: currentLauncher().detail}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		abi = 0
	}
	rep.LandlockABI = abi
	set := func(l Layer, ok bool, detail string) {
		rep.Layers = append(rep.Layers, LayerStatus{Layer: l, Active: ok, Detail: detail})
	}
	if !mainCalled.Load() {
		for _, l := range Layers() {
			set(l, false, "sandbox.Main was not called in this binary")
		}
		return rep
	}
	// Try all the namespaces, then without the user namespace (root only).
	try := func(user bool) (probeResult, error) {
		trial := Report{Layers: []LayerStatus{{LayerPIDNS, true, ""}, {LayerMountNS, true, ""}, {LayerUserNS, user, ""}}}
		cmd, err := newCmd(context.Background(), spec{Probe: true, MountNS: true, Root: rep.Root}, true, trial)
		if err != nil {
			return probeResult{}, err
		}
		if err := cmd.Start(); err != nil {
			return probeResult{}, err
		}
		werr := cmd.Cmd.Wait()
		defer cmd.status.Close()
		_ = cmd.status.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4096)
		n, _ := cmd.status.Read(buf)
		var pr probeResult
		if err := json.Unmarshal(buf[:n], &pr); err != nil {
			return probeResult{}, fmt.Errorf("probe launcher: %v (%v)", werr, err)
		}
		return pr, nil
	}
	pr, err := try(true)
	userOK, nsOK := err == nil, err == nil
	userDetail := "a new user namespace: no capability outside it"
	if err != nil {
		userDetail = "cannot create a user namespace: " + err.Error()
		if rep.Root {
			pr, err = try(false)
			nsOK = err == nil
		}
	}
	nsDetail := "cannot create namespaces"
	if err != nil {
		nsDetail += ": " + err.Error()
	}
	set(LayerUserNS, userOK, userDetail)
	if nsOK && pr.PID == 1 {
		set(LayerPIDNS, true, "a new PID namespace: only the sandbox's processes are visible, all die with the program")
	} else {
		set(LayerPIDNS, false, nsDetail)
	}
	// A layer the probe launcher tried: why it failed there, if it did.
	tried := func(l Layer, failed, detail string) {
		switch {
		case !nsOK:
			set(l, false, nsDetail)
		case failed != "":
			set(l, false, failed)
		default:
			set(l, true, detail)
		}
	}
	tried(LayerMountNS, pr.MountNS, "a new mount namespace: fresh /proc, private /tmp, read-only bind mounts")
	tried(LayerFSView, pr.FSView, "the root is a new tmpfs with only the granted paths bound (read-only where ro): no host /run, /var/run, /var/tmp or /tmp, so no daemon's socket")
	if nsOK {
		set(LayerNetNS, true, "a new, empty network namespace when the grant has no net")
	} else {
		set(LayerNetNS, false, nsDetail)
	}
	if abi >= 1 {
		set(LayerLandlock, true, fmt.Sprintf("Landlock ABI %d: file system rules", abi))
	} else {
		set(LayerLandlock, false, "Landlock is not available (kernel < 5.13, or not in the lsm= boot list)")
	}
	if abi >= 4 {
		set(LayerLandlockNet, true, fmt.Sprintf("Landlock ABI %d: TCP bind and connect rules", abi))
	} else {
		set(LayerLandlockNet, false, fmt.Sprintf("Landlock ABI %d has no network rules (needs 4, Linux 6.7+)", abi))
	}
	cgp := thePlaces()
	rep.Cgroups = cgp.report()
	if mem := cgp.memory; mem.dir != "" {
		how := "cgroup v1: a memory cgroup per sandbox under " + mem.dir
		if mem.v2 {
			how = "cgroup v2: a cgroup per sandbox under " + mem.dir + " (memory.max, memory.swap.max 0, memory.oom.group)"
		}
		set(LayerMemoryCgroup, true, how+": memory_mb bounds all of its processes together")
	} else {
		set(LayerMemoryCgroup, false, mem.why)
	}
	tried(LayerSeccomp, pr.Seccomp, "a seccomp filter: no ptrace, process_vm_*, pidfd_getfd or kcmp (the launcher out of reach), no new namespaces, io_uring, keyrings, bpf or mounts, sockets of the unix, inet and netlink families only")
	pids := cgp.pids
	pidsV := "cgroup v1"
	if pids.v2 {
		pidsV = "cgroup v2"
	}
	switch {
	case !rep.Root && pids.v2 && pids.dir != "" && cgp.memory.v2 && cgp.memory.dir != "":
		set(LayerPIDLimit, true, "RLIMIT_NPROC (not root), and pids.max in the sandbox's cgroup under "+pids.dir+" (cgroup v2)")
	case !rep.Root:
		set(LayerPIDLimit, true, "RLIMIT_NPROC (not root)")
	case nsOK && pr.PIDLimit == "" && pids.dir != "":
		set(LayerPIDLimit, true, "running as root, where RLIMIT_NPROC does not apply: a pids cgroup per sandbox under "+pids.dir+" ("+pidsV+")")
	case nsOK && pr.PIDLimit == "":
		set(LayerPIDLimit, true, "running as root, where RLIMIT_NPROC does not apply: the PID namespace's pid_max, at least 301, so max_procs below 299 holds as 299 ("+pids.why+")")
	default:
		d := pr.PIDLimit
		if !nsOK {
			d = nsDetail
		}
		set(LayerPIDLimit, false, "running as root, where RLIMIT_NPROC does not apply, and the PID namespace's pid_max cannot be set: "+d)
	}
	slices.SortStableFunc(rep.Layers, func(a, b LayerStatus) int {
		return slices.Index(Layers(), a.Layer) - slices.Index(Layers(), b.Layer)
	})
	return rep
}

// observed is what the launcher saw of a program's end.
type observed struct {
	sig       syscall.Signal // the signal that ended it, if one did
	failed    bool           // it did not exit 0
	timedOut  bool
	cpu       time.Duration
	peakProcs int   // sampled from the sandbox's /proc
	peakVM    int64 // largest address space sampled
	// addressSpace is set when memory_mb was RLIMIT_AS (no memory
	// cgroup), so that a large address space explains a failure.
	addressSpace bool
	procCap      int // max_procs where the sampled count means it (0: not)
	cgroups      cgroupCounts
	tmpFull      bool // the private /tmp had no room left
}

// describeLimit names the limit that stopped a program, from what the
// launcher observed; lim has the defaults filled in. The kernel's own
// counts (a fork refused at pids.max, the memory cgroup's OOM killer)
// name a limit also when the program exited 0: its processes were cut
// short (a fork bomb whose first shell exits at once). The rest are
// inferences from a failed program (its signal, its CPU time, the
// sampled process count and address space).
func describeLimit(lim Grant, o observed) *LimitError {
	cg := o.cgroups
	switch {
	case cg.oomKills > 0:
		reached := fmt.Sprintf("reached %d MiB", cg.memPeak>>20)
		if cg.memPeak == 0 {
			reached = "reached their limit" // no peak counter (v2 before Linux 5.19)
		}
		return &LimitError{Limit: "memory_mb", Detail: fmt.Sprintf("the sandbox's processes together %s (memory_mb %d, all of them together), and the kernel killed %d of them", reached, lim.MemoryMB, cg.oomKills)}
	case cg.forkFailures > 0:
		n := max(cg.pidsPeak, int64(o.peakProcs))
		return &LimitError{Limit: "max_procs", Detail: fmt.Sprintf("the sandbox reached %d processes, its limit (max_procs %d); a fork failed %d times", n, lim.MaxProcs, cg.forkFailures)}
	case o.timedOut:
		return &LimitError{Limit: "timeout", Detail: fmt.Sprintf("the sandbox ran longer than %s (timeout) and every process in it was killed", lim.Timeout)}
	case !o.failed:
		return nil
	case lim.CPU > 0 && (o.sig == syscall.SIGXCPU || (o.sig == syscall.SIGKILL && o.cpu >= lim.CPU.D())):
		return &LimitError{Limit: "cpu", Detail: fmt.Sprintf("the program used %s of CPU time, its limit is %s (cpu)", o.cpu.Round(time.Millisecond), lim.CPU)}
	case o.sig == syscall.SIGXFSZ:
		return &LimitError{Limit: "max_file_mb", Detail: fmt.Sprintf("the program wrote a file larger than %d MiB (max_file_mb)", lim.MaxFileMB)}
	case o.procCap > 0 && o.peakProcs >= o.procCap:
		return &LimitError{Limit: "max_procs", Detail: fmt.Sprintf("the sandbox reached %d processes, its limit (max_procs %d); further forks failed", o.peakProcs, lim.MaxProcs)}
	case o.addressSpace && o.peakVM >= int64(lim.MemoryMB)<<20*85/100:
		return &LimitError{Limit: "memory_mb", Detail: fmt.Sprintf("a process reached %d MiB of address space, its limit is %d MiB (memory_mb); further allocations failed", o.peakVM>>20, lim.MemoryMB)}
	case o.tmpFull:
		return &LimitError{Limit: "max_file_mb", Detail: fmt.Sprintf("the private /tmp (max_file_mb: %d MiB) is full", lim.MaxFileMB)}
	}
	return nil
}
