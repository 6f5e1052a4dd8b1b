package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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
// The host (the kernel) makes one cgroup per controller per sandbox, in
// its own cgroup of the v1 hierarchy, and writes the limit; the launcher
// forks the program into them (programCgroups) and stays outside itself,
// so a program that fills them cannot starve the launcher, which must
// still report and clean up. The host removes them once the launcher is
// gone.

// cgroupV1 is one controller's v1 hierarchy where this process may make
// child cgroups.
type cgroupV1 struct {
	once sync.Once
	dir  string // this process's own cgroup in the hierarchy; "" if unusable
	why  string // why not, when dir is ""
}

var (
	pidsV1   = &cgroupV1{}
	memoryV1 = &cgroupV1{}
	cgSeq    atomic.Uint64
)

func (c *cgroupV1) root(controller string) (string, string) {
	c.once.Do(func() { c.dir, c.why = findCgroupV1(controller) })
	return c.dir, c.why
}

// pidsCgroupRoot and memoryCgroupRoot find, once, where this process may
// make pids and memory cgroups.
func pidsCgroupRoot() (string, string)   { return pidsV1.root("pids") }
func memoryCgroupRoot() (string, string) { return memoryV1.root("memory") }

// findCgroupV1 finds the controller's v1 mount plus this process's own
// cgroup in it, writable.
func findCgroupV1(controller string) (string, string) {
	own, v2 := "", false
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			// hierarchy-ID:controller-list:path
			f := strings.SplitN(line, ":", 3)
			switch {
			case len(f) == 3 && hasField(f[1], ",", controller):
				own = f[2]
			case len(f) == 3 && f[0] == "0" && f[1] == "":
				v2 = true
			}
		}
	}
	if own == "" {
		if v2 {
			return "", fmt.Sprintf("the %s controller is on cgroup v2 only, which the sandbox does not use yet (it needs a v1 %s hierarchy)", controller, controller)
		}
		return "", fmt.Sprintf("no cgroup v1 %s controller for this process (/proc/self/cgroup)", controller)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, pf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(pf) < 3 || pf[0] != "cgroup" || !hasField(pf[2], ",", controller) {
			continue
		}
		root, mnt := fields[3], fields[4]
		rel, err := filepath.Rel(root, own)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		dir := filepath.Join(mnt, rel)
		if err := unix.Access(dir, unix.W_OK); err != nil {
			return "", fmt.Sprintf("the %s cgroup %s is not writable: %v", controller, dir, err)
		}
		return dir, ""
	}
	return "", fmt.Sprintf("the %s cgroup controller is not mounted", controller)
}

func hasField(s, sep, want string) bool {
	for _, f := range strings.Split(s, sep) {
		if f == want {
			return true
		}
	}
	return false
}

// sandboxCgroups are the cgroups the host made for one sandbox.
type sandboxCgroups struct {
	pids, memory string
}

// newSandboxCgroups makes sp's cgroups and writes their limits into them:
// a pids cgroup when only one holds max_procs (root, below pid_max's
// floor, and the hierarchy is there; otherwise the floor is the bound, as
// documented), and a memory cgroup when memory is true (the layer holds
// here: failing to make one is then an error, never a silent per-process
// limit). It sets the spec's fields.
func newSandboxCgroups(sp *spec, memory bool) (*sandboxCgroups, error) {
	cg := &sandboxCgroups{}
	if sp.Root && sp.MaxProcs > 0 && sp.MaxProcs < pidMaxFloor {
		if root, _ := pidsCgroupRoot(); root != "" {
			d, err := makeCgroup(root, map[string]string{"pids.max": strconv.Itoa(sp.MaxProcs)})
			if err == nil {
				cg.pids, sp.PIDsCgroup = d, d
			}
		}
	}
	if memory {
		root, why := memoryCgroupRoot()
		if root == "" {
			cg.remove()
			return nil, fmt.Errorf("sandbox: memory cgroup: %s", why)
		}
		b := strconv.FormatInt(int64(sp.MemoryMB)<<20, 10)
		// memsw (memory plus swap) exists with swap accounting; set after
		// the memory limit, which it must not be below.
		d, err := makeCgroup(root, map[string]string{"memory.limit_in_bytes": b, "memory.memsw.limit_in_bytes": b})
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("sandbox: memory cgroup for memory_mb: %w", err)
		}
		cg.memory, sp.MemoryCgroup = d, d
	}
	return cg, nil
}

// makeCgroup makes a cgroup under root, named after this process so that
// ones left by a kernel that died are removed by the next (sweepCgroups),
// and writes limits into it (in the order of limitOrder; a file that does
// not exist is skipped).
func makeCgroup(root string, limits map[string]string) (string, error) {
	sweepCgroups(root)
	dir := filepath.Join(root, fmt.Sprintf("agentkernel-%d-%d", os.Getpid(), cgSeq.Add(1)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	for _, name := range limitOrder {
		v, ok := limits[name]
		if !ok {
			continue
		}
		err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0)
		if errors.Is(err, os.ErrNotExist) && name == "memory.memsw.limit_in_bytes" {
			continue // no swap accounting: nothing to bound
		}
		if err != nil {
			_ = os.Remove(dir)
			return "", fmt.Errorf("set %s in %s: %w", name, dir, err)
		}
	}
	return dir, nil
}

var limitOrder = []string{"pids.max", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}

// remove removes the cgroups once the launcher is gone (an empty cgroup
// is removed with rmdir; v1 moves what is still charged to the parent).
func (c *sandboxCgroups) remove() {
	if c == nil {
		return
	}
	for _, d := range []string{c.pids, c.memory} {
		if d != "" {
			_ = os.Remove(d)
		}
	}
}

// sweepCgroups removes the cgroups of kernels that no longer run (a busy
// cgroup refuses rmdir).
func sweepCgroups(root string) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "agentkernel-")
		if !ok || !e.IsDir() {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if n, err := strconv.Atoi(pid); err == nil && n != os.Getpid() && unix.Kill(n, 0) == unix.ESRCH {
			_ = os.Remove(filepath.Join(root, e.Name()))
		}
	}
}

// programCgroups puts the program, and only the program, in the
// sandbox's cgroups. cgroup v1 moves single threads: the launcher's
// locked main thread enters the cgroups just to fork the program, which
// is born in them, and leaves at once; the tasks files (writable, one of
// them the kernel's own cgroup's) are then closed, so nothing writable of
// the cgroups stays open in the launcher while the program runs. What
// stays open is read-only: the counters that name a limit once the
// program is gone. Every file is opened during confine, before the view
// and Landlock.
type programCgroups struct {
	in, out []*os.File // tasks of the sandbox's cgroups, and of their parents
	// pidsEvents (pids.events), pidsPeak (pids.peak), memOOM
	// (memory.oom_control) and memPeak (memory.max_usage_in_bytes):
	// read-only, read at the end.
	pidsEvents, pidsPeak, memOOM, memPeak *os.File
}

// openProgramCgroups opens what the fork and the report need. The
// launcher's own cgroup is each sandbox cgroup's parent: the host makes
// them in its own cgroup, which the launcher inherited.
func openProgramCgroups(sp *spec) (*programCgroups, error) {
	c := &programCgroups{}
	open := func(name string, flag int) (*os.File, error) {
		f, err := os.OpenFile(name, flag, 0)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("open the sandbox's cgroup file %s: %w", name, err)
		}
		return f, nil
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
	if sp.PIDsCgroup != "" {
		if c.pidsEvents, err = open(filepath.Join(sp.PIDsCgroup, "pids.events"), os.O_RDONLY); err != nil {
			return nil, err
		}
		c.pidsPeak, _ = os.Open(filepath.Join(sp.PIDsCgroup, "pids.peak")) // Linux 6.12+

	}
	if sp.MemoryCgroup != "" {
		if c.memOOM, err = open(filepath.Join(sp.MemoryCgroup, "memory.oom_control"), os.O_RDONLY); err != nil {
			return nil, err
		}
		if c.memPeak, err = open(filepath.Join(sp.MemoryCgroup, "memory.max_usage_in_bytes"), os.O_RDONLY); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// enter moves the calling thread (locked to its goroutine) into the
// sandbox's cgroups; leave moves it back and closes the tasks files.
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

func moveThread(tasks *os.File, what string) error {
	if _, err := tasks.WriteString(strconv.Itoa(unix.Gettid())); err != nil {
		return fmt.Errorf("%s: %w", what, err)
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
	for _, f := range []*os.File{c.pidsEvents, c.pidsPeak, c.memOOM, c.memPeak} {
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
}

// counts reads the counters; what cannot be read stays zero.
func (c *programCgroups) counts() cgroupCounts {
	var n cgroupCounts
	if c == nil {
		return n
	}
	n.forkFailures = readKeyed(c.pidsEvents, "max")
	n.oomKills = readKeyed(c.memOOM, "oom_kill")
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
