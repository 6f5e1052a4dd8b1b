package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/hostpath"
)

// The sandbox's file system view (LayerFSView). Landlock decides what a
// process may do with a path it names, but not every use of a path is a
// Landlock right: at ABI 7, connect(2) and sendto(2) to a pathname unix
// socket are not, so under the host's tree a confined program could reach
// every daemon listening under /run, /var/run, /var/tmp or /tmp (docker,
// containerd, dbus, ssh-agent, tmux). A path that does not exist cannot be
// connected to, so the launcher builds the root instead of inheriting it,
// as bubblewrap does: a new, empty tmpfs, with a bind mount for every path
// the grant names (read-only where ro), the symlinks on the way to them,
// a fresh /proc, a private /tmp and the harmless devices; then it pivots
// into it and detaches the host's tree. Why, and why not seccomp or
// Landlock for sockets: RATIONALE.md, "Pathname sockets: a built root".

// Devices every sandbox gets, read-write and read-only.
var (
	devicesRW = []string{"/dev/null", "/dev/zero", "/dev/full"}
	devicesRO = []string{"/dev/random", "/dev/urandom"}
)

// viewEntry is one thing the view holds at dst.
type viewEntry struct {
	dst  string
	kind viewKind
	src  string // bind: the real path on the host
	link string // symlink: its target, as the host has it
	rw   bool   // bind: writable
	dir  bool   // bind: a directory (else a file)
	dev  bool   // bind: device nodes stay usable (under /dev)
	// shown: dst is inside a bind of the host's (see inBind).
	shown bool
}

type viewKind int

const (
	viewBind viewKind = iota
	viewCopy          // a small read-only file, copied into the root's tmpfs
	viewLink
	viewTmp // the private /tmp
)

// copyMax is the largest granted read-only file copied into the view
// rather than bound: a bind is a mount to make and, when the sandbox
// ends, to tear down, and a default grant names twenty small files of
// /etc. A copy is what the file held when the sandbox started.
const copyMax = 256 << 10

// planView resolves the rules on the host's tree, before the pivot:
// every symlink on the way to a granted path is recreated in the view
// (same place, same target) and the path it leads to is bound, so paths
// resolve in the view as on the host, and only to what was granted.
// Entries are ordered by depth, so a bind lands inside its parent's.
func planView(sp *spec) ([]viewEntry, error) {
	var plan []viewEntry
	seen := map[string]bool{}
	// One Lstat per place in the plan: the granted paths share their
	// parents (/usr, /etc), and each path's last place is asked about
	// twice. The plan is a snapshot either way; the build follows no link.
	var w hostpath.Walker
	add := func(path string, rw, optional bool) (string, error) {
		real, lst, links, err := resolveLinks(&w, path)
		if err != nil {
			if optional && errors.Is(err, os.ErrNotExist) {
				return "", nil
			}
			return "", fmt.Errorf("fs view: resolve %s: %w", path, err)
		}
		for _, l := range links {
			if !seen["l"+l.dst] {
				seen["l"+l.dst] = true
				plan = append(plan, l)
			}
		}
		if within(real, "/proc") || seen["b"+real] {
			return real, nil // the sandbox's own /proc
		}
		// real's last component is no link, so its Lstat is its Stat; a
		// link there (made since) is followed, as os.Stat would.
		st := lst
		if st.Mode()&os.ModeSymlink != 0 {
			if st, err = os.Stat(real); err != nil {
				return "", fmt.Errorf("fs view: %s: %w", real, err)
			}
		}
		seen["b"+real] = true
		e := viewEntry{dst: real, kind: viewBind, src: real, rw: rw, dir: st.IsDir(), dev: within(real, "/dev")}
		if !rw && !e.dev && st.Mode().IsRegular() && st.Size() <= copyMax {
			e.kind = viewCopy
		}
		plan = append(plan, e)
		return real, nil
	}
	hostTmp := false
	for i, r := range sp.Rules {
		real, err := add(r.Path, r.RW, false)
		if err != nil {
			return nil, err
		}
		sp.Rules[i].real = real
		hostTmp = hostTmp || filepath.Clean(r.Path) == "/tmp"
	}
	for _, d := range devicesRW {
		if _, err := add(d, true, true); err != nil {
			return nil, err
		}
	}
	for _, d := range devicesRO {
		if _, err := add(d, false, true); err != nil {
			return nil, err
		}
	}
	if !hostTmp {
		plan = append(plan, viewEntry{dst: "/tmp", kind: viewTmp})
	}
	for _, fd := range [][2]string{{"/dev/fd", "/proc/self/fd"}, {"/dev/stdin", "/proc/self/fd/0"}, {"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"}} {
		if !seen["l"+fd[0]] {
			plan = append(plan, viewEntry{dst: fd[0], kind: viewLink, link: fd[1]})
		}
	}
	// By depth; at one depth the private /tmp first, so that nothing
	// lands under it before it is mounted.
	slices.SortStableFunc(plan, func(a, b viewEntry) int {
		if d := depth(a.dst) - depth(b.dst); d != 0 {
			return d
		}
		return int(b.kind) - int(a.kind)
	})
	plan = dropCovered(plan)
	for i := range plan {
		plan[i].shown = inBind(plan, plan[i].dst)
	}
	for i, r := range sp.Rules {
		sp.Rules[i].shown = r.real == "" || within(r.real, "/proc") || inBind(plan, r.real)
	}
	return plan, nil
}

// inBind tells whether p is inside a directory the plan binds from the
// host (the host's tree shows it, where a tool may plant a link), rather
// than reached through the view's own tmpfs alone (where nothing but the
// launcher writes before the program starts).
func inBind(plan []viewEntry, p string) bool {
	for _, a := range plan {
		if a.kind == viewBind && a.dir && a.dst != p && within(p, a.dst) {
			return true
		}
	}
	return false
}

// dropCovered leaves out a bind that the nearest bind above it already
// shows the same way (same mode): /usr/lib under /usr. A bind that
// changes the mode (workspace/.git ro under the workspace rw) stays. A
// file to copy is copied only onto the root's own tmpfs: below a bind
// (the host's tree) or in the private /tmp (writable) it is bound.
func dropCovered(plan []viewEntry) []viewEntry {
	out := plan[:0:0]
	for _, e := range plan {
		if e.kind == viewBind || e.kind == viewCopy {
			var above *viewEntry
			for i := range out {
				// The private /tmp hides what a bind above it shows.
				if a := &out[i]; (a.kind == viewBind && a.dir || a.kind == viewTmp) && a.dst != e.dst && within(e.dst, a.dst) && (above == nil || depth(a.dst) > depth(above.dst)) {
					above = a
				}
			}
			if above != nil && above.kind == viewBind && above.rw == e.rw && above.dev == e.dev {
				continue
			}
			if above != nil && e.kind == viewCopy {
				e.kind = viewBind
			}
		}
		out = append(out, e)
	}
	return out
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// resolveLinks resolves path like the kernel does (hostpath.Locations),
// with every symlink met on the way: its real location and its target.
// A path that does not exist is an error. It returns real's Lstat too.
func resolveLinks(w *hostpath.Walker, path string) (string, os.FileInfo, []viewEntry, error) {
	locs := w.Locations(path)
	real := locs[len(locs)-1]
	var links []viewEntry
	for _, at := range locs[:len(locs)-1] {
		target, err := os.Readlink(at)
		if err != nil {
			return "", nil, nil, err
		}
		links = append(links, viewEntry{dst: at, kind: viewLink, link: target})
	}
	st, err := w.Lstat(real)
	if err != nil {
		return "", nil, nil, err
	}
	return real, st, links, nil
}

// viewBase is where the new root's tmpfs is mounted before the pivot
// (bubblewrap's choice): the host's /tmp, which the pivot uncovers again
// under the old root, so a granted path under /tmp is still bound from
// the host's.
func viewBase() (string, error) {
	for _, d := range []string{"/tmp", "/mnt"} {
		if st, err := os.Lstat(d); err == nil && st.IsDir() {
			return d, nil
		}
	}
	return "", errors.New("fs view: neither /tmp nor /mnt is a directory to build the root on")
}

// buildView makes the launcher's root (and so the program's) the view of
// sp's rules: the host's tree is detached and out of reach once detached
// has returned nil, which the caller waits for before anything can run
// in the sandbox (see detachOld). The working directory stays the same
// path when the view has it, else it is /; until detached, the launcher
// uses absolute paths only.
func buildView(sp *spec) (detached func() error, err error) {
	cwd, _ := os.Getwd()
	plan, err := planView(sp)
	if err != nil {
		return nil, err
	}
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("fs view: %s: %w", what, err)
		}
		return nil
	}
	if err := step("make / private", unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")); err != nil {
		return nil, err
	}
	base, err := viewBase()
	if err != nil {
		return nil, err
	}
	// The root's own tmpfs holds only mount points and symlinks; it is
	// made read-only once built.
	if err := step("mount the root's tmpfs", unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=8m,mode=0755")); err != nil {
		return nil, err
	}
	if err := step("enter the root's tmpfs", os.Chdir(base)); err != nil {
		return nil, err
	}
	for _, d := range []string{"newroot", "oldroot"} {
		if err := step("mkdir "+d, os.Mkdir(d, 0o755)); err != nil {
			return nil, err
		}
	}
	if err := step("bind newroot", unix.Mount("newroot", "newroot", "", unix.MS_BIND|unix.MS_REC, "")); err != nil {
		return nil, err
	}
	// The tmpfs becomes / and the host's tree /oldroot, to bind from.
	if err := step("pivot into the root's tmpfs", unix.PivotRoot(".", "oldroot")); err != nil {
		return nil, err
	}
	if err := step("chdir /", os.Chdir("/")); err != nil {
		return nil, err
	}
	v := &viewBuilder{ours: map[uint64]bool{}, made: map[string]bool{}, trees: map[string]int{}}
	defer v.close()
	if err := v.own("/newroot"); err != nil {
		return nil, err
	}
	for _, e := range plan {
		if err := v.add(e, sp.MaxFileMB); err != nil {
			return nil, err
		}
	}
	if err := v.seal(plan); err != nil {
		return nil, err
	}
	if err := v.proc(); err != nil {
		return nil, err
	}
	if err := step("enter the view", os.Chdir("/newroot")); err != nil {
		return nil, err
	}
	if err := step("pivot into the view", unix.PivotRoot(".", ".")); err != nil {
		return nil, err
	}
	// One lazy unmount takes the build root and, mounted in it at
	// /oldroot, the host's whole tree: every unmount that detaches
	// something waits for an RCU grace period, so two would wait twice.
	// TestViewHoldsNoHostMount holds it.
	wait := detachOld()
	return func() error {
		if err := step("detach the build root and the host's tree", wait()); err != nil {
			return err
		}
		if err := step("chdir /", os.Chdir("/")); err != nil {
			return err
		}
		if cwd != "" && os.Chdir(cwd) != nil {
			_ = os.Chdir("/")
		}
		return nil
	}, nil
}

// detachOld lazily unmounts the mount on top of the working directory
// (after pivot_root(".", "."), the build root with the host's tree in it)
// on another thread of the launcher, and returns the wait for it. The
// mounts are gone from the namespace before umount2 returns, but it
// returns only after an RCU grace period (expedited: 0.1-0.5 ms on the
// loaded 2-core VM, the launcher off CPU), which the launcher spends
// confining itself instead: the rest of its mounts, rlimits, capabilities,
// Landlock (its rules and the restriction of the launcher's own thread,
// never this one) and the seccomp filter take no lock the unmount holds
// while it waits.
// The thread shares the launcher's working directory (Go's threads share
// one fs_struct), which stays put until the wait has returned.
func detachOld() (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- unix.Unmount(".", unix.MNT_DETACH) }()
	return func() error { return <-done }
}

// viewBuilder adds entries under /newroot, creating mount points only on
// the view's own tmpfs file systems, never inside a bind of the host's.
type viewBuilder struct {
	ours map[uint64]bool // devices of the root's tmpfs and the private /tmp
	// made are the directories this builder made on its own tmpfs since
	// the last mount: known to be there and ours without a stat each.
	made  map[string]bool
	trees map[string]int // the binds' mounts by view path, for seal
	buf   []byte         // readWrite's
}

// mounted forgets every directory made knew of, after a mount at p. All
// of them, not only those at or below p: the kernel resolves a mount's
// target through symbolic links, and a bind of the host's tree on the way
// to p may hold one (planted by a tool after its grant was resolved) that
// lands the mount on a directory made believes is still ours.
func (v *viewBuilder) mounted(string) { clear(v.made) }

func (v *viewBuilder) own(p string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return fmt.Errorf("fs view: %s: %w", p, err)
	}
	v.ours[st.Dev] = true
	return nil
}

func (v *viewBuilder) add(e viewEntry, tmpMB int) error {
	dst := "/newroot" + e.dst
	switch e.kind {
	case viewLink:
		if _, err := os.Lstat(dst); err == nil {
			return nil // inside a bind that has it already
		}
		if err := v.mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		if err := os.Symlink(e.link, dst); err != nil {
			return fmt.Errorf("fs view: symlink %s: %w", e.dst, err)
		}
		return nil
	case viewCopy:
		return v.copyFile(e.src, dst)
	case viewTmp:
		if err := v.mkdirAll(dst); err != nil {
			return err
		}
		opts := fmt.Sprintf("size=%dm,mode=1777", tmpMB)
		if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("fs view: mount a private /tmp: %w", err)
		}
		v.mounted(dst)
		return v.own(dst)
	}
	if e.dir {
		if err := v.mkdirAll(dst); err != nil {
			return err
		}
	} else if err := v.mkfile(dst); err != nil {
		return err
	}
	err := v.bind(e)
	v.mounted(dst)
	return err
}

// bind mounts the host's e.src (with what is mounted below it) at e.dst
// in the view. Both are real paths, resolved by the plan: neither is
// resolved through a symbolic link now, so a link planted since in a
// writable bind on the way (by a tool, in this sandbox or another) fails
// the launch instead of moving the bind, its source or its target, onto
// a directory the grant does not name (TestPlantedLinkRedirectsNoBind).
// The detached tree's descriptor is kept for seal: its flags are set on
// this mount, not on whatever a path leads to by then.
func (v *viewBuilder) bind(e viewEntry) error {
	src, err := openNoLinks("/oldroot" + e.src)
	if err != nil {
		return fmt.Errorf("fs view: bind %s: %w", e.src, err)
	}
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	unix.Close(src)
	if err != nil {
		return fmt.Errorf("fs view: bind %s: %w", e.src, err)
	}
	if e.shown {
		var dst int
		if dst, err = openNoLinks("/newroot" + e.dst); err == nil {
			err = unix.MoveMount(tree, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
			unix.Close(dst)
		}
	} else {
		// Only the view's own tmpfs on the way: no link can be there.
		err = unix.MoveMount(tree, "", unix.AT_FDCWD, "/newroot"+e.dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
	}
	if err != nil {
		unix.Close(tree)
		return fmt.Errorf("fs view: bind %s: %w", e.src, err)
	}
	v.trees[e.dst] = tree
	return nil
}

// openNoLinks opens p as a place (O_PATH), refusing a symbolic link
// anywhere on the way, the last component included (ELOOP). Not
// O_NOFOLLOW: with O_PATH it opens a link at the end instead of refusing.
func openNoLinks(p string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err == unix.ELOOP {
		err = errors.New("a symbolic link on the way (one made since the view was planned?)")
	}
	return fd, err
}

// close closes the descriptors of the binds' trees.
func (v *viewBuilder) close() {
	for _, fd := range v.trees {
		unix.Close(fd)
	}
	clear(v.trees)
}

// seal makes every mount of the view read-only, nosuid and nodev at once
// (one call for the whole tree: a call per mount would double the view's
// cost), then, in depth order, changes only the binds that differ from
// what they inherit: an rw bind (and the private /tmp) loses read-only, a
// ro bind inside an rw one gets it back, a device bind loses nodev, each
// with the mounts below it. The proc mount point is made first, while the
// root's tmpfs is still writable.
func (v *viewBuilder) seal(plan []viewEntry) error {
	if err := v.mkdirAll("/newroot/proc"); err != nil {
		return err
	}
	if err := setMountAttr("/newroot", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0, true); err != nil {
		return fmt.Errorf("fs view: make the view read-only: %w", err)
	}
	var done []viewEntry
	for _, e := range plan {
		if e.kind == viewLink || e.kind == viewCopy {
			continue
		}
		rw, dev := e.rw || e.kind == viewTmp, e.dev
		// What e inherits: the nearest mount above it that seal changed
		// (read-only, nodev: the whole view's).
		inRW, inDev, best := false, false, -1
		for _, a := range done {
			if a.dst != e.dst && within(e.dst, a.dst) && depth(a.dst) > best {
				best, inRW, inDev = depth(a.dst), a.rw || a.kind == viewTmp, a.dev
			}
		}
		var set, clr uint64
		switch {
		case rw && !inRW:
			clr |= unix.MOUNT_ATTR_RDONLY
		case !rw && inRW:
			set |= unix.MOUNT_ATTR_RDONLY
		}
		switch {
		case dev && !inDev:
			clr |= unix.MOUNT_ATTR_NODEV
		case !dev && inDev:
			set |= unix.MOUNT_ATTR_NODEV
		}
		done = append(done, e)
		if set|clr == 0 {
			continue
		}
		// A flag the host's mount holds locked cannot be lifted (a
		// read-only file system): the path stays as the host has it.
		if err := v.setAttr(e, set, clr); err != nil && !(set == 0 && errors.Is(err, unix.EPERM)) {
			return fmt.Errorf("fs view: set the mount flags of %s: %w", e.dst, err)
		}
	}
	return nil
}

// setAttr sets and clears the attributes of e's mount and those below
// it: a bind's through the descriptor of its tree (see bind), the
// private /tmp by its path (on the root's own tmpfs: no link can be
// planted on the way).
func (v *viewBuilder) setAttr(e viewEntry, set, clr uint64) error {
	fd, ok := v.trees[e.dst]
	if !ok {
		return setMountAttr("/newroot"+e.dst, set, clr, true)
	}
	return unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: set, Attr_clr: clr})
}

// copyFile copies the host's file src (a real path: no link on the way)
// to dst, on the root's tmpfs, with its permission bits. Raw descriptors,
// not *os.File: a view copies about twenty files of /etc, and os.File's
// poller registration and io.Copy's copy_file_range attempt (EXDEV
// between two file systems) were two thirds of each copy's system calls.
func (v *viewBuilder) copyFile(src, dst string) error {
	in, err := unix.Open("/oldroot"+src, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fs view: %s: %w", src, err)
	}
	defer unix.Close(in)
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil {
		return fmt.Errorf("fs view: %s: %w", src, err)
	}
	if err := v.mkdirAll(filepath.Dir(dst)); err != nil {
		return err
	}
	if err := v.onOurs(filepath.Dir(dst), dst); err != nil {
		return err
	}
	out, err := unix.Open(dst, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, st.Mode&0o777)
	if err != nil {
		return fmt.Errorf("fs view: copy %s: %w", src, err)
	}
	err = v.copyData(in, out)
	if cerr := unix.Close(out); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fs view: copy %s: %w", src, err)
	}
	return nil
}

// copyData copies at most copyMax bytes from in to out: sendfile(2)
// copies in the kernel, page cache to tmpfs (no buffer of the launcher's
// to fault in, one copy of each byte instead of two); where the kernel
// refuses it for these files, through the builder's one buffer.
func (v *viewBuilder) copyData(in, out int) error {
	total := 0
	for total < copyMax {
		n, err := unix.Sendfile(out, in, nil, copyMax-total)
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err == unix.EINVAL || err == unix.ENOSYS:
			if total == 0 {
				return v.readWrite(in, out)
			}
			return err
		case err != nil:
			return err
		case n == 0:
			return nil
		}
		total += n
	}
	return nil
}

// readWrite is copyData through the builder's one buffer.
func (v *viewBuilder) readWrite(in, out int) error {
	if v.buf == nil {
		v.buf = make([]byte, copyMax)
	}
	total := 0
	for total < copyMax {
		n, err := unix.Read(in, v.buf[:copyMax-total])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		for w := v.buf[:n]; len(w) > 0; {
			m, err := unix.Write(out, w)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			w = w[m:]
		}
		total += n
	}
	return nil
}

// mkdirAll makes p and its missing parents, each on the view's tmpfs.
func (v *viewBuilder) mkdirAll(p string) error {
	if v.made[p] {
		return nil
	}
	var st unix.Stat_t
	err := unix.Lstat(p, &st)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return nil
	case err == nil:
		return fmt.Errorf("fs view: %s is in the way of a granted directory", strings.TrimPrefix(p, "/newroot"))
	case !errors.Is(err, unix.ENOENT):
		return fmt.Errorf("fs view: %s: %w", p, err)
	}
	parent := filepath.Dir(p)
	if err := v.mkdirAll(parent); err != nil {
		return err
	}
	if err := v.onOurs(parent, p); err != nil {
		return err
	}
	if err := unix.Mkdir(p, 0o755); err != nil {
		return fmt.Errorf("fs view: mkdir %s: %w", strings.TrimPrefix(p, "/newroot"), err)
	}
	v.made[p] = true
	return nil
}

// mkfile makes an empty file to bind a granted file on.
func (v *viewBuilder) mkfile(p string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err == nil {
		return nil // a file of a bind already there
	}
	parent := filepath.Dir(p)
	if err := v.mkdirAll(parent); err != nil {
		return err
	}
	if err := v.onOurs(parent, p); err != nil {
		return err
	}
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("fs view: mount point for %s: %w", strings.TrimPrefix(p, "/newroot"), err)
	}
	return unix.Close(fd)
}

// onOurs refuses to create p in parent unless parent is on the view's
// own tmpfs: a granted path that vanished since the grant was resolved
// must not make the launcher write into a bind of the host's tree.
func (v *viewBuilder) onOurs(parent, p string) error {
	if v.made[parent] {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(parent, &st); err != nil {
		return fmt.Errorf("fs view: %s: %w", parent, err)
	}
	if !v.ours[st.Dev] {
		return fmt.Errorf("fs view: %s does not exist in its granted parent (removed since the grant was resolved?)", strings.TrimPrefix(p, "/newroot"))
	}
	return nil
}

// proc mounts the sandbox's own /proc: only its processes. The host's is
// still mounted under /oldroot, which a user namespace needs to mount one.
func (v *viewBuilder) proc() error {
	p := "/newroot/proc"
	if err := v.mkdirAll(p); err != nil {
		return err
	}
	if err := unix.Mount("proc", p, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("fs view: mount a fresh /proc: %w", err)
	}
	v.mounted(p)
	return nil
}

// protectProc makes the view's /proc/sys and /proc/sysrq-trigger
// read-only mounts, under Landlock's read-only /proc (after pid_max is
// set).
func protectProc(proc string) error {
	for _, q := range []string{"sys", "sysrq-trigger"} {
		q = filepath.Join(proc, q)
		if _, err := os.Lstat(q); err != nil {
			continue
		}
		if err := unix.Mount(q, q, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("fs view: bind %s: %w", q, err)
		}
		if err := setMountAttr(q, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, 0, true); err != nil {
			return fmt.Errorf("fs view: make %s read-only: %w", q, err)
		}
	}
	return nil
}

// maskedPaths are the host-information files of /proc and /sys that
// container runtimes mask (runc's and crun's defaults, moby's
// /proc/interrupts and /proc/asound, and /proc/key-users beside
// /proc/keys): the kernel's keyrings, timers and scheduler state, its
// memory image, firmware and hardware tables. The sandbox's uid 0 is the
// kernel user's, who is often root: through its own /proc it would read
// them as the host's root does.
var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/key-users",
	"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list", "/proc/timer_stats",
	"/sys/dev/block", "/sys/devices/virtual/powercap", "/sys/firmware", "/sys/fs/selinux",
}

// maskHostInfo hides maskedPaths as runc does: /dev/null bound read-only
// over a file, an empty read-only tmpfs over a directory. A path this
// kernel lacks is skipped; any other failure fails the sandbox (closed).
// The program cannot undo it: it has no capabilities, and seccomp and
// Landlock stand between it and umount.
func maskHostInfo() error {
	for _, p := range maskedPaths {
		fi, err := os.Lstat(p)
		if err != nil {
			continue // not in this kernel, or not in the view
		}
		if fi.IsDir() {
			if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555"); err != nil {
				return fmt.Errorf("mask %s: %w", p, err)
			}
			continue
		}
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask %s: %w", p, err)
		}
		if err := setMountAttr(p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, 0, false); err != nil {
			return fmt.Errorf("mask %s read-only: %w", p, err)
		}
	}
	return nil
}

// setMountAttr sets and clears attributes of the mount at p (and,
// recursive, of every mount below it).
func setMountAttr(p string, set, clr uint64, recursive bool) error {
	var flags uint
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	return unix.MountSetattr(unix.AT_FDCWD, p, flags, &unix.MountAttr{Attr_set: set, Attr_clr: clr})
}
