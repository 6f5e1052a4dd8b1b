package sandbox

// LauncherBuildTag is the build tag the dedicated launcher
// (cmd/sandbox-init) is built with, by make and by the tests that build
// it: it leaves out what only the kernel needs (grant_yaml.go).
const LauncherBuildTag = "agentkernel_launcher"

// initArg0 is argv[0] of the launcher: Main recognises it and becomes the
// sandbox's init instead of running the program.
const initArg0 = "agentkernel-sandbox-init"

// The launcher's extra descriptors: the spec to read, the outcome to
// write, and (pre-started launchers only) the socket the program's argv,
// environment, directory and stdio arrive on.
const (
	specFD   = 3
	statusFD = 4
	ctlFD    = 5
)

// spec is what the host tells the launcher on specFD, in the form of
// spec_codec.go (the JSON tags are for the pool's key, host side).
type spec struct {
	// Probe asks the launcher to report which layers it could apply and
	// exit, instead of running a program.
	Probe bool `json:"probe,omitempty"`
	// Prestarted asks the launcher to confine itself, say so with one
	// byte on ctlFD, and wait there for a goMsg (pool_linux.go); Argv is
	// then empty.
	Prestarted bool     `json:"prestarted,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	// HostPATH finds argv[0] when the program's environment has no PATH.
	HostPATH string `json:"host_path,omitempty"`
	// Rules are the resolved fs grant; BindRO the ro rules nested in rw
	// ones, made read-only with bind mounts.
	Rules  []specRule `json:"rules,omitempty"`
	BindRO []string   `json:"bind_ro,omitempty"`
	Net    *Net       `json:"net,omitempty"`

	MountNS bool `json:"mount_ns"`
	// FSView builds the root from the rules alone (view_linux.go)
	// instead of keeping the host's tree under Landlock.
	FSView      bool `json:"fs_view"`
	Seccomp     bool `json:"seccomp"`
	LandlockABI int  `json:"landlock_abi"`
	Root        bool `json:"root"`

	MemoryMB   int `json:"memory_mb"`
	CPUSeconds int `json:"cpu_seconds"`
	MaxProcs   int `json:"max_procs"`
	// PIDsCgroup and MemoryCgroup are the sandbox's cgroups on cgroup v1
	// hierarchies, made and bounded by the host, that the program is
	// forked into (cgroup_linux.go): pids as root (where RLIMIT_NPROC does
	// not apply) for a max_procs below pid_max's floor, memory for
	// memory_mb.
	PIDsCgroup   string `json:"pids_cgroup,omitempty"`
	MemoryCgroup string `json:"memory_cgroup,omitempty"`
	// Cgroup is the sandbox's cgroup on the unified (v2) hierarchy, made
	// and bounded by the host, that the launcher moves the program into
	// at its execve (cgroup2_linux.go); it holds pids.max when CgroupPIDs,
	// memory_mb when CgroupMemory.
	Cgroup       string `json:"cgroup,omitempty"`
	CgroupPIDs   bool   `json:"cgroup_pids,omitempty"`
	CgroupMemory bool   `json:"cgroup_memory,omitempty"`
	MaxFileMB    int    `json:"max_file_mb"`
	MaxOpenFiles int    `json:"max_open_files"`
	TimeoutNS    int64  `json:"timeout_ns"`
}

// pidsInCgroup reports whether a pids cgroup holds max_procs.
func (sp *spec) pidsInCgroup() bool { return sp.PIDsCgroup != "" || sp.CgroupPIDs }

// memoryInCgroup reports whether a memory cgroup holds memory_mb.
func (sp *spec) memoryInCgroup() bool { return sp.MemoryCgroup != "" || sp.CgroupMemory }

type specRule struct {
	Path string `json:"path"`
	RW   bool   `json:"rw"`
	Dir  bool   `json:"dir"`
	// dev and ino identify the path when the grant was resolved (host
	// side only): a pre-started launcher's rules hold these inodes.
	dev, ino uint64
	// real is Path resolved by the launcher's view plan (launcher side
	// only): the place its Landlock rule is opened at, with no link on
	// the way.
	real  string
	shown bool // real is inside a bind of the host's (see inBind)
}

// probeResult is the launcher's answer to a probe.
type probeResult struct {
	MountNS  string `json:"mount_ns"` // "" when the fresh /proc was mounted, else why not
	FSView   string `json:"fs_view"`  // "" when the root could be built, else why not
	Seccomp  string `json:"seccomp"`  // "" when the filter could be installed, else why not
	PIDLimit string `json:"pid_limit"`
	PID      int    `json:"pid"`
}

// goMsg is what a pre-started launcher waits for on ctlFD, with the
// program's stdin, stdout and stderr attached as SCM_RIGHTS.
type goMsg struct {
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir,omitempty"`
	TimeoutNS int64    `json:"timeout_ns,omitempty"`
}

// readyByte is the pre-started launcher's one-byte "confined, waiting".
const readyByte = 'R'
