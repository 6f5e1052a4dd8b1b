package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The sandboxes' cgroups on the unified (v2) hierarchy. Why this layout:
// RATIONALE.md, "cgroup v2: the kernel in a leaf, the program moved in at
// its exec".
//
// A v2 cgroup can give a controller to its children (cgroup.subtree_control)
// only while it holds no process itself (the root excepted), and only
// what its own cgroup.controllers lists (what its parent delegated). So,
// as systemd, runc and crun do, the kernel moves itself out of its own
// cgroup <own> into a leaf, <own>/kernel, enables memory and pids in
// <own>, and makes each sandbox's cgroup a sibling of its leaf,
// <own>/agentkernel-<kernel pid>-<n>, holding memory.max, memory.swap.max,
// memory.oom.group and pids.max. That needs <own> writable by the kernel's
// uid (root, or a subtree delegated to the user: systemd's Delegate=yes)
// and <own> holding no process but the kernel. A kernel that already runs
// in a leaf named kernel whose parent holds no process (systemd's
// DelegateSubgroup=kernel, or a kernel started by another kernel) makes
// its sandboxes in that parent without moving.

// leafName is the kernel's own leaf cgroup's name.
const leafName = "kernel"

// unified is what prepareUnified made of the kernel's v2 cgroup.
type unified struct {
	base    string            // where the sandboxes' cgroups are made; "" if nowhere
	leaf    string            // the leaf the kernel runs in ("" at the hierarchy's root)
	moved   bool              // the kernel moved itself into leaf
	enabled map[string]bool   // the wanted controllers enabled in base's subtree_control
	missing map[string]string // why a wanted controller is not there
	why     string            // why none is, when base is ""
}

// prepareUnified makes own (this process's cgroup on the unified
// hierarchy, a directory) ready for the sandboxes' cgroups of the wanted
// controllers: it finds the base, checks that it is writable, that it was
// delegated the controllers and that it holds no other process, moves
// process pid into the leaf and enables the controllers. Every refusal
// says what would fix it. Nothing is moved or enabled unless a wanted
// controller is available.
func prepareUnified(fsys cgroupFS, own string, want []string, pid, uid int) unified {
	u := unified{enabled: map[string]bool{}, missing: map[string]string{}}
	if len(want) == 0 {
		u.why = "cgroup v2: no controller wanted"
		return u
	}
	hint := delegateHint(uid)
	base, leaf, inLeaf := own, filepath.Join(own, leafName), false
	if filepath.Base(own) == leafName {
		parent := filepath.Dir(own)
		if procs, err := readProcs(parent); err == nil && len(procs) == 0 && writableCgroup(parent) == nil {
			base, leaf, inLeaf = parent, own, true
		}
	}
	// The hierarchy's root (it alone has no cgroup.type) may hold
	// processes and give controllers to its children: nothing to move.
	_, err := os.Stat(filepath.Join(own, "cgroup.type"))
	atRoot := !inLeaf && errors.Is(err, fs.ErrNotExist)
	if atRoot {
		leaf = ""
	}
	if err := writableCgroup(base); err != nil {
		u.why = fmt.Sprintf("cgroup v2: the kernel's cgroup %s is not writable by uid %d (%v): it was not delegated to this user; %s", base, uid, err, hint)
		return u
	}
	b, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		u.why = fmt.Sprintf("cgroup v2: read the controllers of %s: %v", base, err)
		return u
	}
	avail := strings.Fields(string(b))
	var enable []string
	for _, c := range want {
		if !slices.Contains(avail, c) {
			u.missing[c] = fmt.Sprintf("cgroup v2: the %s controller is not delegated to the kernel's cgroup %s (its cgroup.controllers: %q); %s", c, base, strings.Join(avail, " "), hint)
			continue
		}
		enable = append(enable, c)
	}
	if len(enable) == 0 {
		u.why = u.missing[want[0]]
		return u
	}
	made := false
	if !inLeaf && !atRoot {
		procs, err := readProcs(base)
		if err != nil {
			u.why = fmt.Sprintf("cgroup v2: read the processes of %s: %v", base, err)
			return u
		}
		if others := slices.DeleteFunc(procs, func(p int) bool { return p == pid }); len(others) > 0 {
			u.why = fmt.Sprintf("cgroup v2: the kernel's cgroup %s holds %d other process(es) (%s): a cgroup that gives controllers to child cgroups may hold no process, and the kernel moves only itself out; %s",
				base, len(others), pidList(others), hint)
			return u
		}
		switch err := fsys.mkdirCgroup(leaf); {
		case err == nil:
			made = true
		case !errors.Is(err, fs.ErrExist):
			u.why = fmt.Sprintf("cgroup v2: create the kernel's leaf cgroup %s: %v", leaf, err)
			return u
		}
		if err := writeCgroupFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			if made {
				_ = os.Remove(leaf)
			}
			u.why = fmt.Sprintf("cgroup v2: move the kernel into its leaf cgroup %s: %v", leaf, err)
			return u
		}
		u.moved = true
	}
	b, err = os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
	if err != nil {
		u.why = fmt.Sprintf("cgroup v2: read %s/cgroup.subtree_control: %v", base, err)
		return u
	}
	on := strings.Fields(string(b))
	var add []string
	for _, c := range enable {
		if !slices.Contains(on, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) > 0 {
		if err := writeCgroupFile(filepath.Join(base, "cgroup.subtree_control"), strings.Join(add, " ")); err != nil {
			if u.moved {
				// Back where it was; a base whose subtree_control was
				// already set refuses that, and the kernel stays in
				// the leaf.
				if writeCgroupFile(filepath.Join(base, "cgroup.procs"), strconv.Itoa(pid)) == nil && made {
					_ = os.Remove(leaf)
				}
				u.moved = false
			}
			u.why = fmt.Sprintf("cgroup v2: enable %s for child cgroups in %s/cgroup.subtree_control: %v", strings.Join(add, " "), base, err)
			return u
		}
	}
	for _, c := range enable {
		u.enabled[c] = true
	}
	u.base, u.leaf = base, leaf
	return u
}

// unifiedMemoryLimits are memory_mb (b bytes) on v2: memory.max, no swap
// beyond it (memory.swap.max 0: v1's memsw limit equal to the memory
// limit means the same), and one OOM kill ending every process of the
// sandbox together (memory.oom.group, Linux 4.19+).
func unifiedMemoryLimits(b string) []cgroupLimit {
	return []cgroupLimit{
		{file: "memory.max", value: b},
		{file: "memory.swap.max", value: "0", optional: true}, // no swap accounting: nothing to bound
		{file: "memory.oom.group", value: "1", optional: true},
	}
}

// writableCgroup checks that this process can make child cgroups in dir,
// move processes through it and give its controllers to its children:
// what a delegated subtree's owner can do.
func writableCgroup(dir string) error {
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// readProcs reads the process ids in dir's cgroup.procs.
func readProcs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// pidList names up to five pids.
func pidList(pids []int) string {
	var s []string
	for _, p := range pids[:min(len(pids), 5)] {
		s = append(s, strconv.Itoa(p))
	}
	if len(pids) > 5 {
		s = append(s, "...")
	}
	return "pid " + strings.Join(s, ", ")
}

// delegateHint says how to give the kernel a cgroup of its own, delegated.
func delegateHint(uid int) string {
	if uid != 0 {
		return "start the kernel in a delegated scope of its own: `systemd-run --user --scope -p Delegate=yes kernel ...` " +
			"(or Delegate=yes in its user service)"
	}
	return "start the kernel in a cgroup of its own with delegation: `systemd-run --scope -p Delegate=yes kernel ...`, " +
		"Delegate=yes in its service unit, or in a container a writable /sys/fs/cgroup (a private cgroup namespace)"
}
