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
// pids cgroup controller: the kernel makes one cgroup per launcher, the
// launcher joins it before it gives up its capabilities and sets
// pids.max to max_procs plus its own threads. Why, and what it needs:
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

// joinPidsCgroup moves the launcher into dir and bounds it to maxProcs
// processes (and threads) beside the launcher's own threads. Run by the
// launcher while it still holds its capabilities in its user namespace.
func joinPidsCgroup(dir string, maxProcs int) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0"), 0); err != nil {
		return fmt.Errorf("join the pids cgroup %s: %w", dir, err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("count the launcher's threads: %w", err)
	}
	// Two spare threads for the launcher's Go runtime.
	limit := maxProcs + len(tasks) + 2
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(limit)), 0); err != nil {
		return fmt.Errorf("set pids.max in %s: %w", dir, err)
	}
	return nil
}
