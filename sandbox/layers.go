package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// Layer names one confinement mechanism. A grant needs some of them; where
// the machine lacks one, Command refuses to start the process unless the
// grant's AllowMissing names it.
type Layer string

// The layers, in the order the launcher applies them.
const (
	// LayerUserNS: a new user namespace, so the process holds no
	// capability outside it (also when the kernel runs as root).
	LayerUserNS Layer = "userns"
	// LayerPIDNS: a new PID namespace; the process sees no other process,
	// and everything it starts dies when it exits.
	LayerPIDNS Layer = "pidns"
	// LayerMountNS: a new mount namespace with a fresh /proc (only the
	// sandbox's processes), a private /tmp and read-only bind mounts for
	// ro rules nested in rw ones (workspace/.git).
	LayerMountNS Layer = "mountns"
	// LayerFSView: the sandbox's root is a new, empty tmpfs holding only
	// what the grant names (bind mounts, read-only where ro), a fresh
	// /proc, a private /tmp and the harmless devices; nothing of the
	// host's /run, /var or /tmp, so no daemon's pathname socket (view_linux.go).
	LayerFSView Layer = "fsview"
	// LayerNetNS: a new, empty network namespace when the grant has no net.
	LayerNetNS Layer = "netns"
	// LayerLandlock: Landlock file system rules (the fs grant).
	LayerLandlock Layer = "landlock"
	// LayerLandlockNet: Landlock TCP bind/connect rules (ABI 4+).
	LayerLandlockNet Layer = "landlock_net"
	// LayerPIDLimit: max_procs. RLIMIT_NPROC does not apply to root, so
	// as root the PID namespace's pid_max (Linux 6.14+) bounds it.
	LayerPIDLimit Layer = "pid_limit"
	// LayerMemoryCgroup: memory_mb for the sandbox's processes together,
	// a memory cgroup per sandbox (cgroup_linux.go); without it memory_mb
	// holds per process only.
	LayerMemoryCgroup Layer = "memory_cgroup"
	// LayerSeccomp: a seccomp filter on the program: no ptrace of the
	// launcher, no other process's memory or descriptors, no new
	// namespaces, no io_uring, keyrings, bpf or mounts, and only the unix,
	// inet and netlink socket families (seccomp_linux.go).
	LayerSeccomp Layer = "seccomp"
)

// Layers returns every layer, in order.
func Layers() []Layer {
	return []Layer{LayerUserNS, LayerPIDNS, LayerMountNS, LayerFSView, LayerNetNS, LayerLandlock, LayerLandlockNet, LayerPIDLimit, LayerMemoryCgroup, LayerSeccomp}
}

func layerList() string {
	var s []string
	for _, l := range Layers() {
		s = append(s, string(l))
	}
	return strings.Join(s, ", ")
}

// ErrLayerMissing is matched (errors.Is) by every *MissingLayerError.
var ErrLayerMissing = errors.New("sandbox layer missing")

// MissingLayerError refuses a process because a layer its grant needs is
// not available on this machine and the grant does not accept that.
type MissingLayerError struct {
	Layer  Layer
	Reason string // why the layer is missing here
}

func (e *MissingLayerError) Error() string {
	s := fmt.Sprintf("sandbox: layer %s is missing on this machine (%s); the process was not started. "+
		"Run `kernel sandbox check`; to accept the risk explicitly, set `sandbox: {allow_missing: [%s]}` in kernel.yaml "+
		"(or allow_missing in this tool's grant)", e.Layer, e.Reason, e.Layer)
	if m := missingMeans[e.Layer]; m != "" {
		s += ", knowing that " + m
	}
	return s
}

// missingMeans says what a layer allowed missing leaves, where that is not
// plain from its name.
var missingMeans = map[Layer]string{
	LayerMemoryCgroup: "memory_mb then bounds each process's address space (RLIMIT_AS), not the sandbox's processes together",
}

// Is makes errors.Is(err, ErrLayerMissing) true.
func (e *MissingLayerError) Is(target error) bool { return target == ErrLayerMissing }

// ErrLimit is matched (errors.Is) by every *LimitError.
var ErrLimit = errors.New("sandbox limit reached")

// LimitError says which limit of the grant stopped the process.
type LimitError struct {
	// Limit is the grant field: "cpu", "memory_mb", "max_procs",
	// "max_file_mb" or "timeout".
	Limit  string
	Detail string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("sandbox limit %s reached: %s", e.Limit, e.Detail)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Outcome is how a confined process ended, as its launcher saw it.
type Outcome struct {
	// Exited is true when the process called exit; ExitCode is then its
	// status. Otherwise Signal names the signal that ended it.
	Exited   bool   `json:"exited"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// Limit is set when a limit of the grant stopped it.
	Limit *LimitError `json:"limit,omitempty"`
	// Err is set when the launcher could not start the process (a path
	// outside the grant, a missing program) or failed to confine it.
	Err string `json:"error,omitempty"`
	// Known is false when the launcher died before reporting (it was
	// killed from outside: a timeout or cancellation of the caller).
	Known bool `json:"-"`
}

// String describes the outcome on one line.
func (o Outcome) String() string {
	switch {
	case !o.Known:
		return "killed from outside the sandbox"
	case o.Err != "":
		return "sandbox: " + o.Err
	case o.Limit != nil:
		return o.Limit.Error()
	case o.Exited:
		return fmt.Sprintf("exit code %d", o.ExitCode)
	}
	return "terminated by signal " + o.Signal
}

// LayerStatus is one layer on this machine.
type LayerStatus struct {
	Layer  Layer  `json:"layer"`
	Active bool   `json:"active"`
	Detail string `json:"detail"`
}

// Report is what Check found.
type Report struct {
	Layers []LayerStatus `json:"layers"`
	// LandlockABI is the kernel's Landlock ABI version (0: none).
	LandlockABI int `json:"landlock_abi"`
	// Root is true when the kernel runs as root.
	Root bool `json:"root"`
	// Launcher says which program is every sandbox's PID 1: the
	// dedicated launcher next to the kernel, or a re-exec of the kernel.
	Launcher string `json:"launcher,omitempty"`
	// Cgroups says which cgroup version and directories hold the
	// sandboxes' memory and pids cgroups here.
	Cgroups CgroupReport `json:"cgroups"`
}

// CgroupReport says where the sandboxes' cgroups are made on this machine.
type CgroupReport struct {
	// Version is the cgroup version of the memory controller the sandbox
	// uses (of the pids controller when there is no memory one): 1 or 2,
	// 0 when neither can be used.
	Version int `json:"version"`
	// Memory and PIDs are the directories the sandboxes' memory and pids
	// cgroups are made in, empty where none can be.
	Memory string `json:"memory,omitempty"`
	PIDs   string `json:"pids,omitempty"`
	// KernelCgroup is, on v2, the leaf cgroup the kernel runs in; Moved
	// says the kernel moved itself there.
	KernelCgroup string `json:"kernel_cgroup,omitempty"`
	Moved        bool   `json:"moved,omitempty"`
	// Why says why no memory cgroup can be made, when Memory is empty.
	Why string `json:"why,omitempty"`
}

// String is the report on one line.
func (r CgroupReport) String() string {
	if r.Version == 0 {
		return "none usable: " + r.Why
	}
	s := fmt.Sprintf("v%d", r.Version)
	switch {
	case r.Memory != "" && r.Memory == r.PIDs:
		s += ", the sandboxes' cgroups (memory, pids) in " + r.Memory
	case r.Memory != "" && r.PIDs != "":
		s += ", the sandboxes' memory cgroups in " + r.Memory + ", pids cgroups in " + r.PIDs
	case r.Memory != "":
		s += ", the sandboxes' memory cgroups in " + r.Memory + " (no pids controller)"
	default:
		s += ", the sandboxes' pids cgroups in " + r.PIDs + " (no memory controller: " + r.Why + ")"
	}
	if r.KernelCgroup != "" {
		if r.Moved {
			s += "; the kernel moved itself into " + r.KernelCgroup
		} else {
			s += "; the kernel runs in " + r.KernelCgroup
		}
	}
	return s
}

// Has reports whether layer l is active.
func (r Report) Has(l Layer) bool {
	for _, s := range r.Layers {
		if s.Layer == l {
			return s.Active
		}
	}
	return false
}

func (r Report) detail(l Layer) string {
	for _, s := range r.Layers {
		if s.Layer == l {
			return s.Detail
		}
	}
	return "not probed"
}

// Needs returns the layers g needs, in order.
func (g Grant) Needs() []Layer {
	n := []Layer{LayerUserNS, LayerPIDNS, LayerMountNS, LayerFSView}
	if g.Net == nil {
		n = append(n, LayerNetNS)
	}
	n = append(n, LayerLandlock, LayerLandlockNet, LayerPIDLimit, LayerMemoryCgroup, LayerSeccomp)
	return n
}

// Missing returns the first layer g needs that r lacks and g does not
// allow to be missing, as a *MissingLayerError; nil when g can run here.
func (r Report) Missing(g Grant) error {
	for _, l := range g.Needs() {
		if r.Has(l) {
			continue
		}
		if l == LayerPIDLimit && !r.Root {
			continue // RLIMIT_NPROC holds for a non-root user
		}
		if l == LayerLandlockNet && g.Net == nil && r.Has(LayerNetNS) {
			continue // no network at all: the empty namespace suffices
		}
		allowed := false
		for _, a := range g.AllowMissing {
			allowed = allowed || a == l
		}
		if !allowed {
			return &MissingLayerError{Layer: l, Reason: r.detail(l)}
		}
	}
	return nil
}

// goOutOfMemory are the first lines of the Go runtime's crash reports when
// an allocation fails.
var goOutOfMemory = []string{
	"fatal error: out of memory",
	"fatal error: runtime: out of memory",
	"fatal error: runtime: cannot allocate memory",
}

// ExplainGoOutOfMemory returns o with memory_mb named as the limit that
// stopped a Go program whose crash report (crash: its stderr from the
// report's first line) says the runtime could not allocate, when the
// launcher named no limit itself. The launcher samples the address space
// every few milliseconds, and a program that allocates fast can reach
// RLIMIT_AS and die between two samples; the runtime's own report is the
// evidence then. The limit is enforced by the kernel either way: this only
// explains a crash, and a program that lies in its report only mislabels
// its own crash.
func (o Outcome) ExplainGoOutOfMemory(g Grant, crash string) Outcome {
	if !o.Known || o.Limit != nil || o.Err != "" || (o.Exited && o.ExitCode == 0) {
		return o
	}
	for _, line := range goOutOfMemory {
		if strings.HasPrefix(crash, line) {
			mb := g.limits().MemoryMB
			o.Limit = &LimitError{Limit: "memory_mb", Detail: fmt.Sprintf("the Go runtime could not allocate (%q) under the address-space limit of %d MiB (memory_mb)", line, mb)}
			return o
		}
	}
	return o
}
