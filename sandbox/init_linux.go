package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Main must be called first thing in main (and in TestMain of every test
// binary that starts confined processes). In the kernel it only records
// that the launcher is available and returns. When the binary was
// re-executed by Command as a sandbox's launcher, Main never returns: it
// confines itself, runs the program, reports and exits.
func Main() {
	mainCalled.Store(true)
	if len(os.Args) == 0 || os.Args[0] != initArg0 {
		return
	}
	restoreProgramEnv()
	if len(os.Args) != 2 || os.Args[1] != launcherProto {
		l := &launcher{status: os.NewFile(statusFD, "status")}
		l.report(Outcome{Err: errLauncherProto.Error()})
		os.Exit(126)
	}
	os.Exit(runInit())
}

// launcher is the state of the sandbox's init.
type launcher struct {
	sp     spec
	status *os.File
	// stdio and dir of the program: the launcher's own (a cold start) or
	// the ones a goMsg brought (a pre-started launcher).
	stdio []*os.File
	dir   string
	// cg, when set, are the cgroups the program is forked into.
	cg *programCgroups
	// restricted is the OS thread Landlock and no_new_privs were set on
	// (landlock): the only one the program may be forked from.
	restricted int
	// detached, when set, waits for the view's detach of the host's tree
	// (buildView); called at the end of confine, before the program.
	detached func() error
}

func (l *launcher) report(o Outcome) {
	b, _ := json.Marshal(o)
	_, _ = l.status.Write(b)
}

// runInit is the launcher, PID 1 of the sandbox. Order: out of the
// program's reach (not dumpable, fatal signals caught), cgroup files, the
// file system view (or mounts: fresh /proc, private /tmp, ro binds),
// pid_max, rlimits, capabilities dropped, no_new_privs and Landlock, the
// seccomp filter, then the program as its child; the launcher reaps
// everything and exits with the program, which takes the rest of the PID
// namespace with it.
func runInit() int {
	// Every per-thread setting (capabilities, securebits, the seccomp
	// filter) is made on this thread, and the program is forked from it.
	runtime.LockOSThread()
	// The program runs as the same uid in the same Landlock domain. Not
	// dumpable, the launcher cannot be traced, nor its memory, descriptors
	// (/proc/1/fd, pidfd_getfd) or environment read by a process without
	// CAP_SYS_PTRACE, which the program never has: the report it writes
	// and the cgroup files it holds are out of the program's reach.
	dumpErr := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// A signal the program sends PID 1 is delivered only when the
	// launcher handles it, and Go handles most; relayed here instead, none
	// ends it (SIGKILL and SIGSTOP never arrive from inside the
	// namespace). The program's dispositions are reset to the default by
	// exec. Notify enables each signal with a round trip to the runtime's
	// signal thread, about half a millisecond on a busy machine: it runs
	// beside the confinement, and the program is not started before it is
	// done (notified).
	notified := make(chan struct{})
	go func() {
		signal.Notify(make(chan os.Signal, 1), fatalSignals...)
		close(notified)
	}()
	// Nothing the launcher inherited reaches the program but its stdio: a
	// descriptor the kernel got without close-on-exec (from its own
	// parent, say) would otherwise pass through every exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := 3; fd < 1024; fd++ { // before Linux 5.11
			syscall.CloseOnExec(fd)
		}
	}
	syscall.CloseOnExec(specFD)
	syscall.CloseOnExec(statusFD)
	l := &launcher{status: os.NewFile(statusFD, "status")}
	if dumpErr != nil {
		l.report(Outcome{Err: "make the launcher non-dumpable: " + dumpErr.Error()})
		return 126
	}
	b, err := io.ReadAll(io.LimitReader(os.NewFile(specFD, "spec"), 1<<20))
	if err == nil {
		l.sp, err = decodeSpec(b)
	}
	if err != nil {
		l.report(Outcome{Err: "read the launch spec: " + err.Error()})
		return 126
	}
	if l.sp.Probe {
		return l.probe()
	}
	if err := l.confine(); err != nil {
		l.report(Outcome{Err: err.Error()})
		return 126
	}
	<-notified // before anything in the sandbox can signal PID 1
	l.stdio = []*os.File{os.Stdin, os.Stdout, os.Stderr}
	if l.sp.Prestarted {
		ok, err := l.awaitGo()
		if err != nil {
			l.report(Outcome{Err: err.Error()})
			return 126
		}
		if !ok {
			return 0 // discarded by the pool before use
		}
	}
	return l.run()
}

// fatalSignals are the signals the Go runtime ends a program on when one
// arrives from another process (its sigtable: _SigKill, _SigThrow and
// _SigPanic); it ignores the rest unless notified.
var fatalSignals = []os.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT,
	unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGTERM, unix.SIGSTKFLT, unix.SIGSYS}

// awaitGo tells the host the launcher is confined and waits for the
// program to run. It reports false when the host closed the socket
// instead (the pool discarded this launcher).
func (l *launcher) awaitGo() (bool, error) {
	syscall.CloseOnExec(ctlFD)
	// A host that already sent the program may have closed its end: the
	// message is still queued here, so a failed write means nothing.
	_ = unix.Sendto(ctlFD, []byte{readyByte}, unix.MSG_NOSIGNAL, nil)
	buf := make([]byte, maxGoMsg+1)
	oob := make([]byte, unix.CmsgSpace(3*4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(ctlFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil || n == 0 {
		return false, nil
	}
	if n > maxGoMsg {
		return false, errors.New("the program's argv and environment are too large")
	}
	var fds []int
	if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, cm := range cms {
			if r, err := unix.ParseUnixRights(&cm); err == nil {
				fds = append(fds, r...)
			}
		}
	}
	if len(fds) != 3 {
		return false, fmt.Errorf("the go message carried %d descriptors, want 3 (stdin, stdout, stderr)", len(fds))
	}
	var m goMsg
	if err := json.Unmarshal(buf[:n], &m); err != nil || len(m.Argv) == 0 {
		return false, fmt.Errorf("bad go message: %v", err)
	}
	l.sp.Argv, l.sp.TimeoutNS, l.dir = m.Argv, m.TimeoutNS, m.Dir
	l.stdio = []*os.File{os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "stdout"), os.NewFile(uintptr(fds[2]), "stderr")}
	// The program's environment is the launcher's: as in a cold start,
	// where the host set it on exec.
	os.Clearenv()
	for _, kv := range m.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			os.Setenv(k, v)
		}
	}
	return true, nil
}

func (l *launcher) probe() int {
	pr := probeResult{PID: os.Getpid()}
	mounted := false
	if detached, err := buildView(&l.sp); err != nil {
		pr.FSView = err.Error()
	} else if err := detached(); err != nil {
		pr.FSView = err.Error()
	} else {
		mounted = true
	}
	if !mounted {
		if err := mountProc(); err != nil {
			pr.MountNS = err.Error()
		} else {
			mounted = true
		}
	}
	if l.sp.Root && mounted {
		if err := setPIDMax("/proc", 10); err != nil {
			pr.PIDLimit = err.Error()
		}
	}
	if err := installSeccomp(); err != nil {
		pr.Seccomp = err.Error()
	}
	b, _ := json.Marshal(pr)
	_, _ = l.status.Write(b)
	return 0
}

func mountProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount a fresh /proc: %w", err)
	}
	return nil
}

// setPIDMax bounds the PID namespace to n processes (pid_max n+2, at least
// the kernel's minimum of 301), in the namespace's proc mounted at proc.
func setPIDMax(proc string, n int) error {
	v := max(n+2, 301)
	if err := os.WriteFile(proc+"/sys/kernel/pid_max", []byte(strconv.Itoa(v)), 0); err != nil {
		return fmt.Errorf("set the namespace's pid_max (Linux 6.14+): %w", err)
	}
	return nil
}

// confine applies every layer but the fork to the launcher itself; the
// program inherits them.
func (l *launcher) confine() error {
	sp := &l.sp
	if sp.PIDsCgroup != "" || sp.MemoryCgroup != "" || sp.Cgroup != "" {
		// Before the view: the cgroup file system is not in it.
		c, err := openProgramCgroups(sp)
		if err != nil {
			return err
		}
		l.cg = c
	}
	switch {
	case sp.FSView:
		detached, err := buildView(sp)
		if err != nil {
			return err
		}
		l.detached = detached
	case sp.MountNS:
		if err := l.mountHostTree(); err != nil {
			return err
		}
	}
	// pid_max bounds max_procs only where no pids cgroup does: it counts
	// the launcher's threads too (and a failing fork holds a pid for a
	// moment), so under a fork bomb the launcher could not start the
	// thread its Go runtime needed, and died before it reported.
	if sp.Root && sp.MountNS && !sp.pidsInCgroup() {
		if err := setPIDMax("/proc", sp.MaxProcs); err != nil {
			return err
		}
	}
	if sp.FSView {
		if err := protectProc("/proc"); err != nil {
			return err
		}
	}
	if sp.FSView || sp.MountNS {
		if err := maskHostInfo(); err != nil {
			return err
		}
	}
	for _, r := range []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_NPROC, uint64(sp.MaxProcs)},
		{unix.RLIMIT_FSIZE, uint64(sp.MaxFileMB) << 20},
		{unix.RLIMIT_NOFILE, uint64(sp.MaxOpenFiles)},
		{unix.RLIMIT_CORE, 0},
	} {
		// syscall.Setrlimit, not unix: it also stops os/exec from restoring
		// the kernel's own RLIMIT_NOFILE in the program.
		if err := syscall.Setrlimit(r.res, &syscall.Rlimit{Cur: r.v, Max: r.v}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.res, err)
		}
	}
	if sp.CPUSeconds > 0 {
		c := uint64(sp.CPUSeconds)
		if err := syscall.Setrlimit(unix.RLIMIT_CPU, &syscall.Rlimit{Cur: c, Max: c + 1}); err != nil {
			return fmt.Errorf("setrlimit cpu: %w", err)
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := l.landlock(); err != nil {
		return err
	}
	if sp.Seccomp {
		if err := installSeccomp(); err != nil {
			return err
		}
	}
	if l.detached != nil {
		// The host's tree is out of the namespace before the program (and
		// a pre-started launcher's ready). Landlock and the seccomp filter
		// are this thread's alone, so the unmount's thread runs on
		// unrestricted meanwhile (a Landlock-restricted thread may not
		// unmount), and this thread's opens are absolute paths.
		if err := l.detached(); err != nil {
			return err
		}
		l.detached = nil
	}
	return nil
}

// mountHostTree is the mount namespace without a view (LayerFSView
// allowed missing): the host's tree with a fresh /proc, a private /tmp
// unless a granted path is under it, and read-only binds for ro rules
// nested in rw ones.
func (l *launcher) mountHostTree() error {
	sp := &l.sp
	if err := mountProc(); err != nil {
		return err
	}
	if st, err := os.Stat("/tmp"); err == nil && st.IsDir() && !sp.ruleUnder("/tmp") {
		opts := fmt.Sprintf("size=%dm,mode=1777", sp.MaxFileMB)
		if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount a private /tmp: %w", err)
		}
	}
	for _, p := range sp.BindRO {
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s read-only: %w", p, err)
		}
		if err := setMountAttr(p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0, true); err != nil {
			return fmt.Errorf("remount %s read-only: %w", p, err)
		}
	}
	return nil
}

// dropCapabilities leaves this thread (and so the program) no capability,
// even as uid 0 of its user namespace: the bounding and ambient sets are
// cleared, securebits keep exec from granting any back, then the thread's
// sets are emptied.
func dropCapabilities() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	// NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, each locked; KEEP_CAPS locked off.
	const bits = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
		return fmt.Errorf("set securebits: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

// landlock restricts the launcher's locked thread, and so the program
// forked from it: the fs rules, TCP ports, and (ABI 6+) no signals or
// abstract unix sockets beyond the sandbox; no_new_privs with it. Only
// this thread: the launcher's other threads run launcher code alone and
// end at its exit, and the program is forked from this one (start checks
// that it is), so the all-threads calls go-landlock would make (a stop
// of the world and a signal to every thread, twice) buy the program
// nothing. RATIONALE.md, "The sandbox's cold start, fifth round".
func (l *launcher) landlock() error {
	sp := &l.sp
	if sp.LandlockABI < 1 {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("set no_new_privs: %w", err)
		}
		l.restricted = unix.Gettid()
		return nil // allowed missing: checked by the host
	}
	cfg := []landlock.Config{landlock.V1, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7}[min(sp.LandlockABI, 7)]
	var rules []llRule
	defer func() {
		for _, r := range rules {
			if r.fd >= 0 {
				unix.Close(r.fd)
			}
		}
	}()
	for _, r := range sp.Rules {
		rule, err := l.rulePlace(r)
		if err != nil {
			return err
		}
		switch {
		case r.Dir && r.RW:
			rule.fs = llRWDirs
			if sp.LandlockABI >= 2 {
				rule.fs |= ll.AccessFSRefer
			}
		case r.Dir:
			rule.fs = llRODirs
		case r.RW:
			rule.fs = llRWFile
		default:
			rule.fs = llROFile
		}
		if sp.LandlockABI >= 5 && strings.HasPrefix(r.Path, "/dev/") {
			rule.fs |= ll.AccessFSIoctlDev
		}
		rules = append(rules, rule)
	}
	// The launcher's own devices and /proc: harmless, needed by most programs.
	for _, d := range devicesRW {
		rules = append(rules, llRule{path: d, fd: -1, fs: llRWFile, missingOK: true})
	}
	for _, d := range devicesRO {
		rules = append(rules, llRule{path: d, fd: -1, fs: llROFile, missingOK: true})
	}
	if sp.MountNS {
		// Only the sandbox's processes are in this /proc; the private /tmp
		// dies with the sandbox. In the view /tmp is private unless /tmp
		// itself is granted (a granted path under it is bound into the
		// private one, read-only where ro: the mount decides then).
		rules = append(rules, llPath("/proc", llRODirs))
		if sp.FSView && !sp.ruleIs("/tmp") || !sp.FSView && !sp.ruleUnder("/tmp") {
			rules = append(rules, llRule{path: "/tmp", fd: -1, fs: llRWDirs, missingOK: true})
		}
	}
	if sp.Net != nil && sp.LandlockABI >= 4 {
		for _, p := range sp.Net.Connect {
			rules = append(rules, llRule{fd: -1, port: p, net: ll.AccessNetConnectTCP})
		}
		for _, p := range sp.Net.Bind {
			rules = append(rules, llRule{fd: -1, port: p, net: ll.AccessNetBindTCP})
		}
	}
	if err := restrictThread(cfg, rules); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	l.restricted = unix.Gettid()
	return nil
}

// rulePlace is where r's Landlock rule is put. In a built view it is the
// real path the view's plan resolved r to, opened here with no symbolic
// link on the way, and the rule is added on that descriptor (the very
// file, not a path resolved again): a link a tool planted since in a
// writable bind cannot turn an rw rule into one on the view's root
// (TestPlantedLinkUnsealsNothing). A path the host's tree has no part in
// (see inBind) is opened by path.
func (l *launcher) rulePlace(r specRule) (llRule, error) {
	if !l.sp.FSView {
		return llPath(r.Path, 0), nil
	}
	if r.real == "" {
		return llRule{}, fmt.Errorf("landlock: %s: not in the view's plan", r.Path)
	}
	if !r.shown {
		// A bind's mount point or a copy reached through the view's own
		// tmpfs alone: nothing but the launcher has written there.
		return llRule{name: r.Path, path: r.real, fd: -1}, nil
	}
	fd, err := openNoLinks(r.real)
	if err != nil {
		return llRule{}, fmt.Errorf("landlock: %s: %w", r.Path, err)
	}
	return llRule{name: r.Path, fd: fd}, nil
}

// start starts the program, in the sandbox's cgroups when there are any
// (see programCgroups). It runs on the launcher's locked main thread.
//
// syscall.ForkExec, not os.StartProcess: the launcher is a fresh process
// at every cold start, and os's first StartProcess in a process probes
// pidfd support with an extra fork (CLONE_PIDFD) and a waitid, about
// 0.5-1.5 ms of a cold start here; the launcher waits by pid (wait) and
// opens its own pidfd. The error is os.StartProcess's (*os.PathError,
// "fork/exec <path>").
func (l *launcher) start(path string, argv []string, attr *syscall.ProcAttr) (pid int, err error) {
	// no_new_privs, Landlock, the seccomp filter and the dropped
	// capabilities are this thread's alone: a program forked from any
	// other would have none of them.
	if tid := unix.Gettid(); l.restricted == 0 || tid != l.restricted {
		return 0, fmt.Errorf("the program would be forked from thread %d, not from the confined one (%d)", tid, l.restricted)
	}
	if l.cg != nil {
		if err := l.cg.enter(); err != nil {
			l.cg.closeTasks()
			return 0, err
		}
		defer func() {
			if lerr := l.cg.leave(); lerr != nil && err == nil {
				_ = unix.Kill(pid, unix.SIGKILL)
				pid, err = 0, lerr
			}
		}()
	}
	for attempt := 0; ; attempt++ {
		pid, err = syscall.ForkExec(path, argv, attr)
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == 20 {
			if err != nil {
				return 0, &os.PathError{Op: "fork/exec", Path: path, Err: err}
			}
			return pid, nil
		}
		time.Sleep(time.Duration(attempt+1) * time.Millisecond)
	}
}

// run starts the program, reaps every process that ends up as the
// launcher's child, watches the limits, and reports.
func (l *launcher) run() int {
	sp := &l.sp
	env := os.Environ() // before PATH may be borrowed below
	path := sp.Argv[0]
	if !strings.Contains(path, "/") {
		if _, ok := os.LookupEnv("PATH"); !ok {
			// The program gets no PATH: look it up in the kernel's, as
			// os/exec does for a Cmd with no PATH in its Env.
			os.Setenv("PATH", sp.HostPATH)
			defer os.Unsetenv("PATH")
		}
		p, err := exec.LookPath(path)
		if err != nil {
			l.report(Outcome{Err: fmt.Sprintf("%s: not found in the PATH the program gets (%s)", path, os.Getenv("PATH"))})
			return 127
		}
		path = p
	}
	// memory_mb is the memory cgroup's limit when there is one. Without
	// it (the layer allowed missing) it is RLIMIT_AS per process, which
	// the program gets at one stop right after its execve, before its
	// first instruction: the launcher's own Go runtime must not live
	// under the program's memory limit. A v2 cgroup is entered at the
	// same stop (programCgroups).
	perProcess := !sp.memoryInCgroup()
	traced := perProcess || l.cg.moves()
	files := make([]uintptr, len(l.stdio))
	for i, f := range l.stdio {
		files[i] = ^uintptr(0) // closed in the program, as os.StartProcess does for nil
		if f != nil {
			files[i] = f.Fd()
		}
	}
	attr := &syscall.ProcAttr{Env: env, Files: files, Dir: l.dir,
		Sys: &syscall.SysProcAttr{Ptrace: traced}}
	pid, err := l.start(path, sp.Argv, attr)
	runtime.KeepAlive(l.stdio)
	if err != nil {
		msg := err.Error()
		switch {
		case errors.Is(err, syscall.EACCES):
			msg += " (the program is outside the sandbox's fs grant, or not executable)"
		case errors.Is(err, syscall.EPERM) && traced:
			msg += " (the program starts traced, PTRACE_TRACEME, for one stop after its execve: is kernel.yama.ptrace_scope above 1?)"
		}
		l.report(Outcome{Err: msg})
		return 126
	}
	if err := l.release(pid, traced, perProcess); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		l.report(Outcome{Err: err.Error()})
		return 126
	}

	procCap := 0
	if sp.MountNS {
		procCap = sp.MaxProcs
	}
	w := newWatcher(sp.MountNS)
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); w.loop(stopWatch) }()
	ws, ru, timedOut := l.wait(pid)
	close(stopWatch)
	<-watchDone
	cg := l.cg.counts()
	// The last look, before the rest of the namespace dies, is for
	// describeLimit, which uses what the watcher saw only for a program
	// that failed or a fork the pids cgroup refused: a clean exit skips
	// reading every process of the sandbox's /proc.
	if timedOut || !ws.Exited() || ws.ExitStatus() != 0 || cg.forkFailures > 0 {
		w.sample()
	}
	if sp.Prestarted {
		// The host returns on the report, before this launcher's exit
		// (tearing the namespaces down takes milliseconds): the report
		// must mean that nothing of the sandbox runs or holds the
		// program's stdio any more.
		killAll()
		for _, f := range l.stdio {
			f.Close()
		}
	}

	o := Outcome{Exited: ws.Exited(), ExitCode: ws.ExitStatus(), Known: true}
	code := ws.ExitStatus()
	if ws.Signaled() {
		o.Signal = ws.Signal().String()
		code = 128 + int(ws.Signal())
	}
	var sig syscall.Signal
	if ws.Signaled() {
		sig = ws.Signal()
	}
	obs := observed{
		sig: sig, failed: o.Signal != "" || o.ExitCode != 0, timedOut: timedOut,
		cpu:       time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		peakProcs: w.peakProcs, peakVM: w.peakVM, procCap: procCap, addressSpace: perProcess,
		cgroups: cg, tmpFull: sp.MountNS && tmpFull(),
	}
	lim := Grant{MemoryMB: sp.MemoryMB, MaxProcs: sp.MaxProcs, MaxFileMB: sp.MaxFileMB, CPU: Duration(time.Duration(sp.CPUSeconds) * time.Second),
		Timeout: Duration(sp.TimeoutNS)}
	o.Limit = describeLimit(lim, obs)
	l.report(o)
	return code
}

// tmpFull reports whether the private /tmp has no room left (its size is
// max_file_mb).
func tmpFull() bool {
	var st unix.Statfs_t
	return unix.Statfs("/tmp", &st) == nil && st.Type == unix.TMPFS_MAGIC && st.Bavail == 0
}

// killAll kills every other process of the PID namespace and reaps them,
// for at most two seconds (a process in uninterruptible sleep dies when
// it leaves it; the launcher's exit then takes the namespace down).
func killAll() {
	_ = unix.Kill(-1, unix.SIGKILL)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		wpid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
		case err != nil: // ECHILD: none left
			return
		case wpid == 0:
			time.Sleep(time.Millisecond)
		}
	}
}

// release lets a program started traced go: it waits for the program's
// stop right after its execve, moves it into the sandbox's v2 cgroup
// (cgroup v2 moves whole processes, and the launcher's thread cannot
// clone3 it there: the seccomp filter it forks under refuses clone3),
// sets its address-space limit where memory_mb is per process, and
// detaches. The program runs no instruction of its own before that.
func (l *launcher) release(pid int, traced, perProcess bool) error {
	if !traced {
		return nil
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for the program's exec: %w", err)
		}
		break
	}
	if !ws.Stopped() {
		return fmt.Errorf("the program did not stop after exec (%v)", ws)
	}
	if l.cg.moves() {
		if err := l.cg.moveIn(pid); err != nil {
			return err
		}
	}
	if perProcess {
		v := uint64(l.sp.MemoryMB) << 20
		if err := unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: v, Max: v}, nil); err != nil {
			return fmt.Errorf("set the program's memory limit: %w", err)
		}
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return fmt.Errorf("release the program: %w", err)
	}
	return nil
}

// wait reaps every child of the launcher until the program pid exits,
// killing the whole namespace at the timeout. It runs on the launcher's
// locked thread: Landlock domains are per thread (before ABI 8), and only
// this thread's domain is the program's, so only it may signal the
// program under Landlock's signal scoping.
func (l *launcher) wait(pid int) (ws unix.WaitStatus, ru unix.Rusage, timedOut bool) {
	var deadline time.Time
	if l.sp.TimeoutNS > 0 {
		deadline = time.Now().Add(time.Duration(l.sp.TimeoutNS))
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		pidfd = -1
	} else {
		defer unix.Close(pidfd)
	}
	for {
		wait := 100 * time.Millisecond
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				timedOut, deadline = true, time.Time{}
				_ = unix.Kill(-1, unix.SIGKILL) // every process of the namespace but the launcher
				left = wait
			}
			wait = min(wait, left)
		}
		if pidfd >= 0 {
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, int(wait/time.Millisecond)+1)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
		for {
			var s unix.WaitStatus
			var r unix.Rusage
			wpid, err := unix.Wait4(-1, &s, unix.WNOHANG, &r)
			if err == unix.EINTR {
				continue
			}
			if err != nil || wpid <= 0 {
				break
			}
			if s.Stopped() {
				// A process that made the launcher its tracer
				// (PTRACE_TRACEME) stops at its next signal: let it go
				// with that signal, untraced.
				_, _, _ = unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(wpid), 0, uintptr(s.StopSignal()), 0, 0)
				continue
			}
			if wpid == pid {
				return s, r, timedOut
			}
		}
	}
}

// watcher samples the sandbox's processes (its own /proc) for the peak
// count and the peak address space, to name the limit that stopped a
// program. Enforcement is the kernel's; this only explains.
type watcher struct {
	enabled   bool
	peakProcs int
	peakVM    int64
	page      int64
}

func newWatcher(enabled bool) *watcher {
	return &watcher{enabled: enabled, page: int64(os.Getpagesize())}
}

func (w *watcher) loop(stop <-chan struct{}) {
	if !w.enabled {
		return
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			w.sample()
		}
	}
}

func (w *watcher) sample() {
	if !w.enabled {
		return
	}
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	n := 0
	buf := make([]byte, 128)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		n++
		if name == "1" {
			continue
		}
		f, err := os.Open("/proc/" + name + "/statm")
		if err != nil {
			continue
		}
		k, _ := f.Read(buf)
		f.Close()
		if i := strings.IndexByte(string(buf[:k]), ' '); i > 0 {
			if pages, err := strconv.ParseInt(string(buf[:i]), 10, 64); err == nil && pages*w.page > w.peakVM {
				w.peakVM = pages * w.page
			}
		}
	}
	if n > w.peakProcs {
		w.peakProcs = n
	}
}

// ruleIs reports whether path itself is granted.
func (sp *spec) ruleIs(path string) bool {
	for _, r := range sp.Rules {
		if filepath.Clean(r.Path) == path {
			return true
		}
	}
	return false
}

// ruleUnder reports whether a granted path is dir or beneath it: a private
// tmpfs there would hide it.
func (sp *spec) ruleUnder(dir string) bool {
	for _, r := range sp.Rules {
		if within(r.Path, dir) {
			return true
		}
	}
	return false
}
