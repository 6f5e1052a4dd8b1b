package sandbox

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

// spec is what the host tells the launcher, as JSON on specFD.
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

	MountNS     bool `json:"mount_ns"`
	LandlockABI int  `json:"landlock_abi"`
	Root        bool `json:"root"`

	MemoryMB   int `json:"memory_mb"`
	CPUSeconds int `json:"cpu_seconds"`
	MaxProcs   int `json:"max_procs"`
	// PIDsCgroup is the pids cgroup the launcher joins and bounds to
	// MaxProcs (as root, where RLIMIT_NPROC does not apply; cgroup_linux.go).
	PIDsCgroup   string `json:"pids_cgroup,omitempty"`
	MaxFileMB    int    `json:"max_file_mb"`
	MaxOpenFiles int    `json:"max_open_files"`
	TimeoutNS    int64  `json:"timeout_ns"`
}

type specRule struct {
	Path string `json:"path"`
	RW   bool   `json:"rw"`
	Dir  bool   `json:"dir"`
	// dev and ino identify the path when the grant was resolved (host
	// side only): a pre-started launcher's rules hold these inodes.
	dev, ino uint64
}

// probeResult is the launcher's answer to a probe.
type probeResult struct {
	MountNS  string `json:"mount_ns"` // "" when the fresh /proc was mounted, else why not
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
