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

// max_procs as root. Linux never applies RLIMIT_NPROC to the host's uid 0
// (nor to a user namespace's uid 0 mapped to it), and a PID namespace's
// pid_max cannot go below 301, so as root an exact max_procs needs the
// pids cgroup controller: the kernel makes one cgroup per sandbox, the
// launcher sets its pids.max to max_procs and forks the program into it
// (programCgroup); the launcher itself stays outside. Why, and what it needs:
// RATIONALE.md, "max_procs as root: a pids cgroup per sandbox".

var (
	pidsOnce sync.Once
	pidsDir  string // where this process may make pids cgroups; "" if nowhere
	pidsWhy  string // why not, when pidsDir is ""
	pidsSeq  atomic.Uint64
)

// pidsCgroupRoot finds, once, a pids cgroup hierarchy (v1) in which this
// process may create child cgroups: the pids controller's mount plus this
// process's own cgroup in it, writable.
func pidsCgroupRoot() (string, string) {
	pidsOnce.Do(func() { pidsDir, pidsWhy = findPidsCgroup() })
	return pidsDir, pidsWhy
}

func findPidsCgroup() (string, string) {
	own := ""
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			// hierarchy-ID:controller-list:path
			f := strings.SplitN(line, ":", 3)
			if len(f) == 3 && hasField(f[1], ",", "pids") {
				own = f[2]
			}
		}
	}
	if own == "" {
		return "", "no cgroup v1 pids controller for this process (/proc/self/cgroup)"
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
		if !ok || len(fields) < 5 || len(pf) < 3 || pf[0] != "cgroup" || !hasField(pf[2], ",", "pids") {
			continue
		}
		root, mnt := fields[3], fields[4]
		rel, err := filepath.Rel(root, own)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		dir := filepath.Join(mnt, rel)
		if err := unix.Access(dir, unix.W_OK); err != nil {
			return "", fmt.Sprintf("the pids cgroup %s is not writable: %v", dir, err)
		}
		return dir, ""
	}
	return "", "the pids cgroup controller is not mounted"
}

func hasField(s, sep, want string) bool {
	for _, f := range strings.Split(s, sep) {
		if f == want {
			return true
		}
	}
	return false
}

// newPidsCgroup makes the cgroup a launcher will join and bound, named
// after this process so that ones left by a kernel that died are removed
// by the next (sweepPidsCgroups).
func newPidsCgroup() (string, error) {
	root, why := pidsCgroupRoot()
	if root == "" {
		return "", errors.New(why)
	}
	sweepPidsCgroups(root)
	dir := filepath.Join(root, fmt.Sprintf("agentkernel-%d-%d", os.Getpid(), pidsSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the pids cgroup: %w", err)
	}
	return dir, nil
}

// removePidsCgroup removes a sandbox's cgroup once its launcher is gone.
func removePidsCgroup(dir string) {
	if dir != "" {
		_ = os.Remove(dir)
	}
}

// sweepPidsCgroups removes the cgroups of kernels that no longer run (an
// empty cgroup is removed with rmdir; a busy one refuses).
func sweepPidsCgroups(root string) {
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

// programCgroup puts the program, and only the program, in a pids cgroup
// bounded to max_procs. The launcher stays outside it: its Go runtime may
// need a thread at any time, and a fork bomb that fills the cgroup would
// otherwise kill the launcher (the runtime cannot start a thread) before
// it reports. cgroup v1 moves single threads: the launcher's locked main
// thread enters the cgroup just to fork the program, which is born in it,
// and leaves at once. Both tasks files are opened during confine, before
// Landlock.
type programCgroup struct {
	in, out *os.File // tasks of the program's cgroup, and of the launcher's
}

// openProgramCgroup bounds dir to maxProcs tasks and opens the files the
// fork needs. The launcher's own cgroup is dir's parent: the kernel makes
// dir in its own cgroup, which the launcher inherited.
func openProgramCgroup(dir string, maxProcs int) (*programCgroup, error) {
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(maxProcs)), 0); err != nil {
		return nil, fmt.Errorf("set pids.max in %s: %w", dir, err)
	}
	in, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open the pids cgroup %s: %w", dir, err)
	}
	out, err := os.OpenFile(filepath.Join(filepath.Dir(dir), "tasks"), os.O_WRONLY, 0)
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("open the launcher's pids cgroup: %w", err)
	}
	return &programCgroup{in: in, out: out}, nil
}

// enter moves the calling thread (locked to its goroutine) into the
// program's cgroup; leave moves it back.
func (c *programCgroup) enter() error { return moveThread(c.in, "enter the program's pids cgroup") }
func (c *programCgroup) leave() error { return moveThread(c.out, "leave the program's pids cgroup") }

func moveThread(tasks *os.File, what string) error {
	if _, err := tasks.WriteString(strconv.Itoa(unix.Gettid())); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
