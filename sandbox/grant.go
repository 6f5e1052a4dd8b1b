package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Grant is a capability manifest: everything a confined process may do.
// Anything not granted is denied. The vocabulary is the one WASM tool
// manifests use (fs, net, env, memory_mb, timeout, max_output_bytes) plus
// what only native processes need (cpu, max_procs, max_file_mb,
// max_open_files).
//
// The zero value grants nothing: no file, no network, no environment
// variable, and the default limits. A Grant is a value; it is safe to
// copy and to use from several goroutines once built.
type Grant struct {
	// FS lists the paths the process may use. A directory rule covers
	// everything beneath it. A ro rule inside an rw rule wins below its
	// path (a read-only bind mount), so "workspace rw, workspace/.git ro"
	// means what it says.
	FS []FSRule `yaml:"fs,omitempty" json:"fs,omitempty"`
	// Net is the network the process may use. Nil (or "none" in YAML and
	// JSON) means none: a new, empty network namespace and every TCP bind
	// and connect refused by Landlock.
	Net *Net `yaml:"net,omitempty" json:"net,omitempty"`
	// Env names the variables the caller may pass through. The sandbox
	// itself never adds the kernel's environment: the process gets the
	// caller's exec.Cmd.Env, which callers build from this list.
	Env []string `yaml:"env,omitempty" json:"env,omitempty"`
	// MemoryMB caps the memory of the sandbox's processes together (a
	// memory cgroup: their pages and the private /tmp's); where the
	// memory_cgroup layer is allowed missing, each process's address space
	// (RLIMIT_AS) instead. Zero means DefaultMemoryMB.
	MemoryMB int `yaml:"memory_mb,omitempty" json:"memory_mb,omitempty"`
	// CPU caps each process's CPU time (RLIMIT_CPU, whole seconds). Zero
	// means no CPU limit (Timeout still bounds the wall clock).
	CPU Duration `yaml:"cpu,omitempty" json:"cpu,omitempty"`
	// Timeout kills the whole sandbox after this much wall time. Zero
	// means none: the caller bounds the run (run_command's timeout, a
	// plugin's lifetime).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// MaxProcs caps the processes in the sandbox (RLIMIT_NPROC; as root,
	// where RLIMIT_NPROC does not apply, a pids cgroup and the PID
	// namespace's pid_max, which cannot go below 301). Zero means
	// DefaultMaxProcs.
	MaxProcs int `yaml:"max_procs,omitempty" json:"max_procs,omitempty"`
	// MaxOutputBytes caps the output the caller keeps. The sandbox does not
	// enforce it (the caller reads the output); it is here so one manifest
	// carries every limit. Zero means the caller's default.
	MaxOutputBytes int `yaml:"max_output_bytes,omitempty" json:"max_output_bytes,omitempty"`
	// MaxFileMB caps the size of a file the process writes (RLIMIT_FSIZE)
	// and of the private /tmp. Zero means DefaultMaxFileMB.
	MaxFileMB int `yaml:"max_file_mb,omitempty" json:"max_file_mb,omitempty"`
	// MaxOpenFiles caps open descriptors per process (RLIMIT_NOFILE). Zero
	// means DefaultMaxOpenFiles.
	MaxOpenFiles int `yaml:"max_open_files,omitempty" json:"max_open_files,omitempty"`
	// AllowMissing names the layers this grant may run without when the
	// machine lacks them (see Layer). Empty means every layer the grant
	// needs is required: the process does not start without it.
	AllowMissing []Layer `yaml:"allow_missing,omitempty" json:"allow_missing,omitempty"`
}

// Defaults of the zero Grant limits.
const (
	DefaultMemoryMB     = 4096
	DefaultMaxProcs     = 256
	DefaultMaxFileMB    = 1024
	DefaultMaxOpenFiles = 1024
)

// FSRule grants one path.
type FSRule struct {
	// Path is absolute (callers resolve relative paths against their
	// base before building the Grant).
	Path string `yaml:"path" json:"path"`
	// Mode is "ro" (read and execute) or "rw" (everything). Empty means ro.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Optional rules are skipped when the path does not exist; others
	// are an error.
	Optional bool `yaml:"optional,omitempty" json:"optional,omitempty"`
}

// Writable reports whether the rule grants writing.
func (r FSRule) Writable() bool { return r.Mode == "rw" }

// Net is a network grant. Landlock enforces TCP ports only: a port granted
// for connect may be reached on any host. Host names or addresses need a
// proxy, which the sandbox does not have; they are refused at load. UDP
// and raw sockets are not filtered by Landlock ABI 7: a grant with any
// Net keeps the host's network namespace, so they work.
type Net struct {
	// Connect lists the TCP ports the process may connect to.
	Connect []uint16 `yaml:"connect,omitempty" json:"connect,omitempty"`
	// Bind lists the TCP ports the process may listen on.
	Bind []uint16 `yaml:"bind,omitempty" json:"bind,omitempty"`
}

// UnmarshalJSON reads "none" or an object with connect and bind.
func (n *Net) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte(`"none"`)) {
		*n = Net{}
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("net: want \"none\" or an object with connect and bind port lists")
	}
	for k, v := range raw {
		ports, err := decodePorts(k, func(dst any) error { return json.Unmarshal(v, dst) })
		if err != nil {
			return fmt.Errorf("net.%s: %w", k, err)
		}
		if k == "connect" {
			n.Connect = ports
		} else {
			n.Bind = ports
		}
	}
	return nil
}

// hostPortRE is compiled on first use: the launcher, which links this
// file, never decodes a grant, and a regexp compiled at init costs every
// sandbox's start.
var hostPortRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\S+:\d+$`) })

func decodePorts(key string, decode func(any) error) ([]uint16, error) {
	switch key {
	case "connect", "bind":
	case "hosts", "host", "allow", "domains":
		return nil, fmt.Errorf("host filtering is not enforceable: Landlock filters TCP ports only and the sandbox has no proxy; grant ports (connect: [443])")
	default:
		return nil, fmt.Errorf("unknown key (valid: connect, bind)")
	}
	var items []any
	if err := decode(&items); err != nil {
		return nil, fmt.Errorf("want a list of TCP port numbers")
	}
	var ports []uint16
	for i, it := range items {
		s := fmt.Sprint(it)
		if hostPortRE().MatchString(s) {
			return nil, fmt.Errorf("[%d]: %q names a host: Landlock filters TCP ports only, any host would be reachable on that port; grant the port alone", i, s)
		}
		p, err := strconv.ParseUint(s, 10, 16)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("[%d]: %q is not a TCP port number (1-65535)", i, s)
		}
		ports = append(ports, uint16(p))
	}
	return ports, nil
}

// MarshalYAML writes "none" for an empty grant.
func (n Net) MarshalYAML() (any, error) {
	if len(n.Connect) == 0 && len(n.Bind) == 0 {
		return "none", nil
	}
	type plain Net
	return plain(n), nil
}

var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// Validate checks g and names the first bad field (e.g. "fs[2].mode").
// It does not touch the file system.
func (g Grant) Validate() error {
	for i, r := range g.FS {
		f := fmt.Sprintf("fs[%d]", i)
		switch {
		case r.Path == "":
			return &GrantError{Field: f + ".path", Msg: "is required"}
		case !filepath.IsAbs(r.Path):
			return &GrantError{Field: f + ".path", Msg: fmt.Sprintf("%q must be absolute (resolve it against the config file's directory)", r.Path)}
		case strings.ContainsRune(r.Path, 0):
			return &GrantError{Field: f + ".path", Msg: "contains a NUL byte"}
		}
		switch r.Mode {
		case "", "ro", "rw":
		default:
			return &GrantError{Field: f + ".mode", Msg: fmt.Sprintf("%q is not \"ro\" or \"rw\"", r.Mode)}
		}
	}
	for i, name := range g.Env {
		if !envNameRE().MatchString(name) {
			return &GrantError{Field: fmt.Sprintf("env[%d]", i), Msg: fmt.Sprintf("%q is not an environment variable name (names only: values come from the kernel's environment)", name)}
		}
	}
	for _, l := range []struct {
		f string
		v int
	}{{"memory_mb", g.MemoryMB}, {"max_procs", g.MaxProcs}, {"max_output_bytes", g.MaxOutputBytes}, {"max_file_mb", g.MaxFileMB}, {"max_open_files", g.MaxOpenFiles}} {
		if l.v < 0 {
			return &GrantError{Field: l.f, Msg: "must not be negative (0 means the default)"}
		}
	}
	if g.MemoryMB > 0 && g.MemoryMB < 16 {
		return &GrantError{Field: "memory_mb", Msg: fmt.Sprintf("%d is below the minimum of 16", g.MemoryMB)}
	}
	if g.CPU < 0 || g.Timeout < 0 {
		return &GrantError{Field: "cpu/timeout", Msg: "must not be negative"}
	}
	if g.CPU > 0 && g.CPU < Duration(time.Second) {
		return &GrantError{Field: "cpu", Msg: "must be at least 1s (RLIMIT_CPU counts whole seconds)"}
	}
	if g.MaxOpenFiles > 0 && g.MaxOpenFiles < 16 {
		return &GrantError{Field: "max_open_files", Msg: "must be at least 16"}
	}
	for i, l := range g.AllowMissing {
		if !slices.Contains(Layers(), l) {
			return &GrantError{Field: fmt.Sprintf("allow_missing[%d]", i), Msg: fmt.Sprintf("%q is not a layer (valid: %s)", l, layerList())}
		}
	}
	return nil
}

// GrantError is a bad field of a Grant.
type GrantError struct {
	Field string
	Msg   string
}

func (e *GrantError) Error() string { return "sandbox grant: " + e.Field + ": " + e.Msg }

// DecodeJSON decodes a grant from JSON, refusing unknown fields, and
// validates it.
func DecodeJSON(b []byte) (Grant, error) {
	var g Grant
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return Grant{}, fmt.Errorf("sandbox grant: %w", err)
	}
	return g, g.Validate()
}

// WritablePaths returns the absolute paths g lets a process write, minus
// nothing: a ro rule nested in an rw one is listed separately by
// ReadOnlyPaths. Callers that protect files (the kernel's config, store,
// plugin binaries) check that none of theirs is under one of these.
func (g Grant) WritablePaths() []string {
	var out []string
	for _, r := range g.FS {
		if r.Writable() {
			out = append(out, filepath.Clean(r.Path))
		}
	}
	return out
}

// ReadOnlyPaths returns the absolute paths g lets a process read only.
func (g Grant) ReadOnlyPaths() []string {
	var out []string
	for _, r := range g.FS {
		if !r.Writable() {
			out = append(out, filepath.Clean(r.Path))
		}
	}
	return out
}

// CanWrite reports whether g lets a process write path (absolute): it is
// under an rw rule and not under a more specific ro rule.
func (g Grant) CanWrite(path string) bool {
	best, w := -1, false
	for _, r := range g.FS {
		p := filepath.Clean(r.Path)
		if within(path, p) && len(p) > best {
			best, w = len(p), r.Writable()
		}
	}
	return w
}

// within reports whether p is base or beneath it.
func within(p, base string) bool {
	p, base = filepath.Clean(p), filepath.Clean(base)
	if p == base || base == "/" {
		return true
	}
	return strings.HasPrefix(p, base+"/")
}

// Intersect returns what a tool gets when it requests req and the operator
// grants g: every path of req covered by g (ro unless both say rw), the
// ports and variables both name, and the smaller of each limit (zero
// meaning the default on either side). Warnings describe every request
// that was cut. AllowMissing comes from g alone: accepting a risk is the
// operator's call.
func (g Grant) Intersect(req Grant) (Grant, []string) {
	var out Grant
	var warn []string
	for _, r := range req.FS {
		mode, ok := "", false
		best := -1
		for _, gr := range g.FS {
			p := filepath.Clean(gr.Path)
			if within(r.Path, p) && len(p) > best {
				best, ok = len(p), true
				mode = gr.Mode
			}
		}
		if !ok {
			warn = append(warn, fmt.Sprintf("fs %s (%s) requested but not granted", r.Path, orRO(r.Mode)))
			continue
		}
		m := "ro"
		if r.Writable() && mode == "rw" {
			m = "rw"
		} else if r.Writable() {
			warn = append(warn, fmt.Sprintf("fs %s requested rw but granted ro", r.Path))
		}
		out.FS = append(out.FS, FSRule{Path: r.Path, Mode: m, Optional: r.Optional})
	}
	if req.Net != nil {
		if g.Net == nil {
			warn = append(warn, "net requested but not granted")
		} else {
			n := &Net{}
			n.Connect, warn = intersectPorts("connect", req.Net.Connect, g.Net.Connect, warn)
			n.Bind, warn = intersectPorts("bind", req.Net.Bind, g.Net.Bind, warn)
			out.Net = n
		}
	}
	for _, e := range req.Env {
		if slices.Contains(g.Env, e) {
			out.Env = append(out.Env, e)
		} else {
			warn = append(warn, fmt.Sprintf("env %s requested but not granted", e))
		}
	}
	out.MemoryMB = minLimit(req.MemoryMB, g.MemoryMB)
	out.CPU = minLimit(req.CPU, g.CPU)
	out.Timeout = minLimit(req.Timeout, g.Timeout)
	out.MaxProcs = minLimit(req.MaxProcs, g.MaxProcs)
	out.MaxOutputBytes = minLimit(req.MaxOutputBytes, g.MaxOutputBytes)
	out.MaxFileMB = minLimit(req.MaxFileMB, g.MaxFileMB)
	out.MaxOpenFiles = minLimit(req.MaxOpenFiles, g.MaxOpenFiles)
	out.AllowMissing = slices.Clone(g.AllowMissing)
	return out, warn
}

func orRO(m string) string {
	if m == "" {
		return "ro"
	}
	return m
}

func intersectPorts(what string, req, granted []uint16, warn []string) ([]uint16, []string) {
	var out []uint16
	for _, p := range req {
		if slices.Contains(granted, p) {
			out = append(out, p)
		} else {
			warn = append(warn, fmt.Sprintf("net %s %d requested but not granted", what, p))
		}
	}
	return out, warn
}

// minLimit is the smaller non-zero value; zero when both are zero.
func minLimit[T int | Duration](a, b T) T {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// SystemDirs are what a default grant makes read-only: the program and
// library directories, and the parts of /etc programs need to start and
// resolve names (not all of /etc: it holds secrets such as /etc/shadow,
// which the sandbox's uid 0 would own when the kernel runs as root).
func SystemDirs() []FSRule {
	var out []FSRule
	for _, p := range []string{"/usr", "/bin", "/sbin"} {
		out = append(out, FSRule{Path: p, Mode: "ro", Optional: true})
	}
	return append(append(out, LibraryDirs()...), etcFiles()...)
}

// LibraryDirs are the shared library directories and the dynamic loader's
// cache: what a dynamically linked binary needs to start, nothing more.
func LibraryDirs() []FSRule {
	var out []FSRule
	for _, p := range []string{"/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/etc/ld.so.cache"} {
		out = append(out, FSRule{Path: p, Mode: "ro", Optional: true})
	}
	return out
}

func etcFiles() []FSRule {
	var out []FSRule
	for _, p := range []string{"ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "hosts", "resolv.conf",
		"localtime", "timezone", "ssl", "ca-certificates", "pki", "alternatives", "mime.types", "protocols", "services",
		"terminfo", "inputrc", "locale.alias", "locale.conf", "default", "environment", "profile", "bash.bashrc", "shells"} {
		out = append(out, FSRule{Path: "/etc/" + p, Mode: "ro", Optional: true})
	}
	return out
}

// Describe renders g on one line for `kernel sandbox check` and logs.
func (g Grant) Describe() string {
	var parts []string
	var fs []string
	sys := map[string]bool{}
	for _, r := range SystemDirs() {
		sys[r.Path] = true
	}
	libs := map[string]bool{}
	for _, r := range LibraryDirs() {
		libs[r.Path] = true
	}
	shownSys, shownLibs := false, false
	for _, r := range g.FS {
		switch {
		case libs[r.Path] && !r.Writable():
			if !shownLibs {
				fs = append(fs, "<library dirs>:ro")
				shownLibs = true
			}
			continue
		case sys[r.Path] && !r.Writable():
			if !shownSys {
				fs = append(fs, "<system dirs>:ro")
				shownSys = true
			}
			continue
		}
		fs = append(fs, r.Path+":"+orRO(r.Mode))
	}
	if len(fs) == 0 {
		fs = []string{"nothing"}
	}
	parts = append(parts, "fs "+strings.Join(fs, " "))
	switch {
	case g.Net == nil:
		parts = append(parts, "net none")
	default:
		parts = append(parts, fmt.Sprintf("net tcp connect %v bind %v", g.Net.Connect, g.Net.Bind))
	}
	if len(g.Env) > 0 {
		parts = append(parts, "env "+strings.Join(g.Env, ","))
	}
	lim := g.limits()
	parts = append(parts, fmt.Sprintf("memory_mb %d, max_procs %d, max_file_mb %d, max_open_files %d", lim.MemoryMB, lim.MaxProcs, lim.MaxFileMB, lim.MaxOpenFiles))
	if g.CPU > 0 {
		parts = append(parts, "cpu "+g.CPU.String())
	}
	if g.Timeout > 0 {
		parts = append(parts, "timeout "+g.Timeout.String())
	}
	return strings.Join(parts, "; ")
}

// limits returns g with the default limits filled in.
func (g Grant) limits() Grant {
	if g.MemoryMB == 0 {
		g.MemoryMB = DefaultMemoryMB
	}
	if g.MaxProcs == 0 {
		g.MaxProcs = DefaultMaxProcs
	}
	if g.MaxFileMB == 0 {
		g.MaxFileMB = DefaultMaxFileMB
	}
	if g.MaxOpenFiles == 0 {
		g.MaxOpenFiles = DefaultMaxOpenFiles
	}
	return g
}
