package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroups per sandbox. Two limits need the kernel to count the sandbox's
// processes together, which only cgroups do:
//
//   - max_procs as root. Linux never applies RLIMIT_NPROC to the host's
//     uid 0 (nor to a user namespace's uid 0 mapped to it), and a PID
//     namespace's pid_max cannot go below 301, so as root an exact
//     max_procs needs the pids controller. RATIONALE.md, "max_procs as
//     root: a pids cgroup per sandbox".
//   - memory_mb for the whole sandbox. RLIMIT_AS bounds each process's
//     address space, so n processes could use n times memory_mb; the
//     memory controller charges every page of every process (and of the
//     private /tmp) to one limit. RATIONALE.md, "memory_mb for the
//     sandbox: a memory cgroup".
//
// The host (the kernel) makes the sandbox's cgroups and writes their
// limits; the launcher puts the program in them and stays outside itself,
// so a program that fills them cannot starve the launcher, which must
// still report and clean up. The host removes them once the launcher is
// gone. A controller on a cgroup v1 hierarchy (this file) gets one cgroup
// per controller, in the kernel's own cgroup of that hierarchy, and the
// program is born in it (programCgroups.enter); the controllers on the
// unified v2 hierarchy share one cgroup, a sibling of the kernel's own
// leaf, and the program is moved into it before its first instruction
// (cgroup2_linux.go; RATIONALE.md, "cgroup v2: the kernel in a leaf, the
// program moved in at its exec").

// cgroupPlace is where the sandboxes' cgroups of one controller are made.
type cgroupPlace struct {
	dir string // where; "" when none can be made here
	v2  bool   // the controller is on the unified (v2) hierarchy
	why string // why none can be made, when dir is ""
}

// cgroupPlaces are this process's places for the controllers the sandbox
// uses.
type cgroupPlaces struct {
	memory, pids cgroupPlace
	// leaf is, on v2, the cgroup the kernel runs in (the sandboxes'
	// cgroups are its siblings); moved says the kernel moved itself there.
	leaf  string
	moved bool
}

var (
	placesOnce sync.Once
	places     cgroupPlaces
	cgSeq      atomic.Uint64
)

// thePlaces finds, once, where this process makes the sandboxes' cgroups.
// On v2 that may move the kernel into a leaf cgroup (prepareUnified).
func thePlaces() cgroupPlaces {
	placesOnce.Do(func() {
		self, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			why := "read /proc/self/cgroup: " + err.Error()
			places = cgroupPlaces{memory: cgroupPlace{why: why}, pids: cgroupPlace{why: why}}
			return
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		places = findCgroups(cgroupFS{}, string(self), string(mi), os.Getpid(), os.Geteuid())
	})
	return places
}

// procCgroup is /proc/self/cgroup.
type procCgroup struct {
	v1    map[string]string // controller → this process's cgroup on its v1 hierarchy
	v2    string            // this process's cgroup on the unified hierarchy
	hasV2 bool
}

func parseProcCgroup(s string) procCgroup {
	pc := procCgroup{v1: map[string]string{}}
	for _, line := range strings.Split(s, "\n") {
		// hierarchy-ID:controller-list:path; the unified one is "0::path".
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			pc.v2, pc.hasV2 = f[2], true
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c != "" {
				pc.v1[c] = f[2]
			}
		}
	}
	return pc
}

// cgroupDir finds the mount of fstype ("cgroup" holding controller, or
// "cgroup2") whose root holds path, in mountinfo, and returns path's
// directory there.
func cgroupDir(mountinfo, fstype, controller, path string) (string, bool) {
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		fields, pf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(pf) < 3 || pf[0] != fstype {
			continue
		}
		if controller != "" && !hasField(pf[2], ",", controller) {
			continue
		}
		root, mnt := fields[3], fields[4]
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return filepath.Join(mnt, rel), true
	}
	return "", false
}

// findCgroups decides, per controller, where the sandboxes' cgroups go: a
// controller on a v1 hierarchy stays there (a hybrid machine, like the
// development VM, keeps v1); one that is on no v1 hierarchy goes to the
// unified one when this process has a cgroup there.
func findCgroups(fsys cgroupFS, self, mountinfo string, pid, uid int) cgroupPlaces {
	pc := parseProcCgroup(self)
	var p cgroupPlaces
	var onV2 []string
	for _, c := range []struct {
		name  string
		place *cgroupPlace
	}{{"memory", &p.memory}, {"pids", &p.pids}} {
		path, ok := pc.v1[c.name]
		switch {
		case ok:
			*c.place = findCgroupV1(c.name, path, mountinfo)
		case pc.hasV2:
			c.place.v2 = true
			onV2 = append(onV2, c.name)
		default:
			c.place.why = fmt.Sprintf("this process has no %s cgroup: neither a cgroup v1 %s hierarchy nor cgroup v2 (/proc/self/cgroup)", c.name, c.name)
		}
	}
	if len(onV2) == 0 {
		return p
	}
	var u unified
	if own, ok := cgroupDir(mountinfo, "cgroup2", "", pc.v2); ok {
		u = prepareUnified(fsys, own, onV2, pid, uid)
	} else {
		u.why = "cgroup v2: the unified hierarchy is not mounted (no cgroup2 in /proc/self/mountinfo)"
	}
	for _, c := range []struct {
		name  string
		place *cgroupPlace
	}{{"memory", &p.memory}, {"pids", &p.pids}} {
		switch {
		case !c.place.v2:
		case u.enabled[c.name]:
			c.place.dir = u.base
		case u.missing[c.name] != "":
			c.place.why = u.missing[c.name]
		default:
			c.place.why = u.why
		}
	}
	p.leaf, p.moved = u.leaf, u.moved
	return p
}

// findCgroupV1 finds the controller's v1 mount and this process's own
// cgroup (path) in it, writable.
func findCgroupV1(controller, path, mountinfo string) cgroupPlace {
	dir, ok := cgroupDir(mountinfo, "cgroup", controller, path)
	if !ok {
		return cgroupPlace{why: fmt.Sprintf("cgroup v1: the %s controller is not mounted", controller)}
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return cgroupPlace{why: fmt.Sprintf("cgroup v1: the %s cgroup %s is not writable: %v", controller, dir, err)}
	}
	return cgroupPlace{dir: dir}
}

func hasField(s, sep, want string) bool {
	for _, f := range strings.Split(s, sep) {
		if f == want {
			return true
		}
	}
	return false
}

func (p cgroupPlaces) report() CgroupReport {
	r := CgroupReport{Memory: p.memory.dir, PIDs: p.pids.dir, KernelCgroup: p.leaf, Moved: p.moved, Why: p.memory.why}
	switch {
	case p.memory.dir != "" && p.memory.v2, p.memory.dir == "" && p.pids.dir != "" && p.pids.v2:
		r.Version = 2
	case p.memory.dir != "" || p.pids.dir != "":
		r.Version = 1
	}
	return r
}

// sandboxCgroups are the cgroups the host made for one sandbox.
type sandboxCgroups struct {
	pids, memory string // v1
	unified      string // v2
}

// newSandboxCgroups makes sp's cgroups and writes their limits into them,
// and sets the spec's fields: a memory cgroup when memory is true (the
// layer holds here: failing to make one is then an error, never a silent
// per-process limit), and pids.max where only a cgroup holds max_procs
// (root, below pid_max's floor, and the controller is there; otherwise the
// floor is the bound, as documented) or, on v2, in the sandbox's one
// cgroup whenever it is made.
func newSandboxCgroups(sp *spec, memory bool) (*sandboxCgroups, error) {
	return makeSandboxCgroups(cgroupFS{}, thePlaces(), sp, memory)
}

func makeSandboxCgroups(fsys cgroupFS, p cgroupPlaces, sp *spec, memory bool) (*sandboxCgroups, error) {
	cg := &sandboxCgroups{}
	rootPIDs := sp.Root && sp.MaxProcs > 0 && sp.MaxProcs < pidMaxFloor
	procs := strconv.Itoa(sp.MaxProcs)
	if rootPIDs && p.pids.dir != "" && !p.pids.v2 {
		if d, err := fsys.makeCgroup(p.pids.dir, false, []cgroupLimit{{file: "pids.max", value: procs}}); err == nil {
			cg.pids, sp.PIDsCgroup = d, d
		}
	}
	if memory && p.memory.dir == "" {
		cg.remove()
		return nil, fmt.Errorf("sandbox: memory cgroup: %s", p.memory.why)
	}
	b := strconv.FormatInt(int64(sp.MemoryMB)<<20, 10)
	if memory && !p.memory.v2 {
		// memsw (memory plus swap) exists with swap accounting; set after
		// the memory limit, which it must not be below.
		d, err := fsys.makeCgroup(p.memory.dir, false, []cgroupLimit{
			{file: "memory.limit_in_bytes", value: b},
			{file: "memory.memsw.limit_in_bytes", value: b, optional: true},
		})
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("sandbox: memory cgroup for memory_mb: %w", err)
		}
		cg.memory, sp.MemoryCgroup = d, d
	}
	memV2 := memory && p.memory.v2
	pidsV2 := p.pids.v2 && p.pids.dir != "" && sp.MaxProcs > 0 && (rootPIDs || memV2)
	if !memV2 && !pidsV2 {
		return cg, nil
	}
	base := p.pids.dir
	var limits []cgroupLimit
	if memV2 {
		base = p.memory.dir
		limits = append(limits, unifiedMemoryLimits(b)...)
	}
	if pidsV2 {
		limits = append(limits, cgroupLimit{file: "pids.max", value: procs})
	}
	d, err := fsys.makeCgroup(base, true, limits)
	switch {
	case err != nil && memV2:
		cg.remove()
		return nil, fmt.Errorf("sandbox: memory cgroup for memory_mb: %w", err)
	case err != nil:
		return cg, nil // pids only: pid_max's floor holds, as on v1
	}
	cg.unified, sp.Cgroup, sp.CgroupMemory, sp.CgroupPIDs = d, d, memV2, pidsV2
	return cg, nil
}

// cgroupLimit is a value written into a new cgroup's file; an optional
// one is skipped where the file does not exist (no swap accounting).
type cgroupLimit struct {
	file, value string
	optional    bool
}

// cgroupFS makes cgroups: the zero value in the kernel's cgroup file
// system; tests set mkdir to a fake cgroupfs's, which makes the interface
// files as the kernel would.
type cgroupFS struct {
	mkdir func(dir string) error
}

func (fsys cgroupFS) mkdirCgroup(dir string) error {
	if fsys.mkdir != nil {
		return fsys.mkdir(dir)
	}
	return os.Mkdir(dir, 0o700)
}

// makeCgroup makes a cgroup under root, named after this process so that
// ones left by a kernel that died are removed by the next (sweepCgroups),
// and writes limits into it, in order.
func (fsys cgroupFS) makeCgroup(root string, v2 bool, limits []cgroupLimit) (string, error) {
	sweepCgroups(root, v2)
	dir := filepath.Join(root, fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), cgSeq.Add(1)))
	if err := fsys.mkdirCgroup(dir); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	for _, l := range limits {
		err := writeCgroupFile(filepath.Join(dir, l.file), l.value)
		if l.optional && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			removeCgroup(dir, v2)
			return "", fmt.Errorf("set %s in %s: %w", l.file, dir, err)
		}
	}
	return dir, nil
}

// cgroupPrefix starts the name of every sandbox's cgroup:
// agentkernel-<kernel pid>-<n>.
const cgroupPrefix = "agentkernel-"

// writeCgroupFile writes v into an existing cgroup file: never creates
// one, never follows a link.
func writeCgroupFile(name, v string) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// remove removes the cgroups once the launcher is gone.
func (c *sandboxCgroups) remove() {
	if c == nil {
		return
	}
	removeCgroup(c.pids, false)
	removeCgroup(c.memory, false)
	removeCgroup(c.unified, true)
}

// removeCgroup removes a sandbox's cgroup. An empty cgroup is removed with
// rmdir (v1 moves what is still charged to the parent; v2 keeps it
// charged until freed). On v2 every process still in it is killed first
// (cgroup.kill, Linux 5.14+): without a PID namespace (allowed missing) a
// program's survivors are in it. A cgroup still busy after that stays
// for the next kernel's sweep.
func removeCgroup(dir string, v2 bool) {
	if dir == "" {
		return
	}
	if v2 {
		_ = writeCgroupFile(filepath.Join(dir, "cgroup.kill"), "1")
	}
	for i := 0; ; i++ {
		err := os.Remove(dir)
		if err == nil || !v2 || !errors.Is(err, unix.EBUSY) || i == 20 {
			return
		}
		time.Sleep(5 * time.Millisecond) // the killed are still exiting
	}
}

// sweepCgroups removes the cgroups of kernels that no longer run (a busy
// v1 cgroup refuses rmdir).
func sweepCgroups(root string, v2 bool) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if n, err := strconv.Atoi(pid); err == nil && n != os.Getpid() && unix.Kill(n, 0) == unix.ESRCH {
			removeCgroup(filepath.Join(root, e.Name()), v2)
		}
	}
}

// programCgroups puts the program, and only the program, in the
// sandbox's cgroups. cgroup v1 moves single threads: the launcher's
// locked main thread enters the v1 cgroups just to fork the program,
// which is born in them, and leaves at once; the tasks files (writable,
// one of them the kernel's own cgroup's) are then closed. cgroup v2 moves
// whole processes, so the launcher moves the program instead, by its pid,
// while it is stopped right after its execve (moveIn), and closes the
// cgroup's cgroup.procs then. Nothing writable of the cgroups stays open
// in the launcher while the program runs. What stays open is read-only:
// the counters that name a limit once the program is gone. Every file is
// opened during confine, before the view and Landlock.
type programCgroups struct {
	in, out []*os.File // v1: tasks of the sandbox's cgroups, and of their parents
	procs   *os.File   // v2: cgroup.procs of the sandbox's cgroup, until the program is in
	// pidsEvents (pids.events), pidsPeak (pids.peak), memEvents (v1
	// memory.oom_control, v2 memory.events) and memPeak (v1
	// memory.max_usage_in_bytes, v2 memory.peak): read-only, read at the
	// end.
	pidsEvents, pidsPeak, memEvents, memPeak *os.File
}

// openProgramCgroups opens what the fork and the report need. On v1 the
// launcher's own cgroup is each sandbox cgroup's parent: the host makes
// them in its own cgroup, which the launcher inherited.
func openProgramCgroups(sp *spec) (*programCgroups, error) {
	c := &programCgroups{}
	open := func(name string, flag int) (*os.File, error) {
		f, err := os.OpenFile(name, flag|unix.O_NOFOLLOW, 0)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("open the sandbox's cgroup file %s: %w", name, err)
		}
		return f, nil
	}
	// optional opens a counter a kernel may not have.
	optional := func(name string) *os.File {
		f, _ := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		return f
	}
	for _, dir := range []string{sp.PIDsCgroup, sp.MemoryCgroup} {
		if dir == "" {
			continue
		}
		in, err := open(filepath.Join(dir, "tasks"), os.O_WRONLY)
		if err != nil {
			return nil, err
		}
		c.in = append(c.in, in)
		out, err := open(filepath.Join(filepath.Dir(dir), "tasks"), os.O_WRONLY)
		if err != nil {
			return nil, err
		}
		c.out = append(c.out, out)
	}
	var err error
	pids, mem := sp.PIDsCgroup, sp.MemoryCgroup
	memEvents, memPeak := "memory.oom_control", "memory.max_usage_in_bytes"
	if sp.Cgroup != "" {
		if c.procs, err = open(filepath.Join(sp.Cgroup, "cgroup.procs"), os.O_WRONLY); err != nil {
			return nil, err
		}
		if sp.CgroupPIDs {
			pids = sp.Cgroup
		}
		if sp.CgroupMemory {
			mem, memEvents, memPeak = sp.Cgroup, "memory.events", "memory.peak" // memory.peak: Linux 5.19+
		}
	}
	if pids != "" {
		if c.pidsEvents, err = open(filepath.Join(pids, "pids.events"), os.O_RDONLY); err != nil {
			return nil, err
		}
		c.pidsPeak = optional(filepath.Join(pids, "pids.peak")) // Linux 6.12+
	}
	if mem != "" {
		if c.memEvents, err = open(filepath.Join(mem, memEvents), os.O_RDONLY); err != nil {
			return nil, err
		}
		c.memPeak = optional(filepath.Join(mem, memPeak))
	}
	return c, nil
}

// enter moves the calling thread (locked to its goroutine) into the
// sandbox's v1 cgroups; leave moves it back and closes the tasks files.
func (c *programCgroups) enter() error {
	for _, f := range c.in {
		if err := moveThread(f, "enter the sandbox's cgroup"); err != nil {
			return err
		}
	}
	return nil
}

func (c *programCgroups) leave() error {
	var first error
	for _, f := range c.out {
		if err := moveThread(f, "leave the sandbox's cgroup"); err != nil && first == nil {
			first = err
		}
	}
	c.closeTasks()
	return first
}

// moveThread moves the calling thread into the cgroup of the tasks file.
// It writes 0 (the writing thread itself), not the thread's id: the same
// move, but the kernel then skips its global cgroup_threadgroup_rwsem,
// which a move by id takes for writing. The first writer of that lock
// after a quiet spell waits for an RCU grace period (5-15 ms on the 2-core
// VM, more under load): that wait was the largest part of a cold start.
// RATIONALE.md, "Cold start: a cgroup move without the global lock".
func moveThread(tasks *os.File, what string) error {
	if _, err := tasks.WriteString("0"); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// moves reports whether the program is to be moved into a v2 cgroup.
func (c *programCgroups) moves() bool { return c != nil && c.procs != nil }

// moveIn moves process pid (of the launcher's PID namespace) into the
// sandbox's v2 cgroup and closes its cgroup.procs.
func (c *programCgroups) moveIn(pid int) error {
	_, err := c.procs.WriteString(strconv.Itoa(pid))
	c.procs.Close()
	c.procs = nil
	if err != nil {
		return fmt.Errorf("move the program into the sandbox's cgroup: %w", err)
	}
	return nil
}

func (c *programCgroups) closeTasks() {
	for _, f := range append(c.in, c.out...) {
		f.Close()
	}
	c.in, c.out = nil, nil
}

func (c *programCgroups) close() {
	c.closeTasks()
	for _, f := range []*os.File{c.procs, c.pidsEvents, c.pidsPeak, c.memEvents, c.memPeak} {
		if f != nil {
			f.Close()
		}
	}
}

// cgroupCounts is what the kernel counted for the sandbox's cgroups.
type cgroupCounts struct {
	forkFailures int64 // forks refused at pids.max
	pidsPeak     int64 // the most tasks at once
	oomKills     int64 // processes the memory cgroup's OOM killer ended
	memPeak      int64 // the most memory charged at once, bytes
	// memMax (v2 memory.events "max") counts the times the charge reached
	// memory.max and the kernel reclaimed. Page cache reaches it too, so
	// it explains an OOM kill but names no limit by itself.
	memMax int64
}

// counts reads the counters; what cannot be read stays zero.
func (c *programCgroups) counts() cgroupCounts {
	var n cgroupCounts
	if c == nil {
		return n
	}
	n.forkFailures = readKeyed(c.pidsEvents, "max")
	n.oomKills = readKeyed(c.memEvents, "oom_kill")
	n.memMax = readKeyed(c.memEvents, "max")
	n.pidsPeak = readInt(c.pidsPeak)
	n.memPeak = readInt(c.memPeak)
	return n
}

// readInt reads a cgroup file holding one number.
func readInt(f *os.File) int64 {
	if f == nil {
		return 0
	}
	buf := make([]byte, 64)
	k, _ := f.ReadAt(buf, 0)
	n, _ := strconv.ParseInt(strings.TrimSpace(string(buf[:k])), 10, 64)
	return n
}

// readKeyed reads the value of key from a flat-keyed cgroup file ("key
// value" lines).
func readKeyed(f *os.File, key string) int64 {
	if f == nil {
		return 0
	}
	buf := make([]byte, 512)
	k, _ := f.ReadAt(buf, 0)
	for _, line := range strings.Split(string(buf[:k]), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
