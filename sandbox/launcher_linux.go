package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// LauncherName is the file name of the dedicated launcher the kernel looks
// for next to its own executable (built from cmd/sandbox-init).
const LauncherName = "agentkernel-sandbox-init"

// launcherProto is argv[1] of every launcher start: a launcher built from
// other sources (a different spec) refuses to run instead of misreading
// the spec. Bump it when spec changes.
const launcherProto = "spec-6"

// Why a dedicated launcher and what it costs: RATIONALE.md, "The dedicated
// sandbox launcher (cmd/sandbox-init)".
//
// launcherSHA256 is the hex sha256 of the dedicated launcher, linked in by
// the Makefile (-ldflags -X). Empty (a plain `go build`): no dedicated
// launcher is trusted and the kernel re-executes itself.
var launcherSHA256 string

// launcherExe is the program Command starts as the sandbox's PID 1.
type launcherExe struct {
	path   string // what exec.Cmd runs
	detail string // for Check
	fd     *os.File
}

var (
	launcherMu  sync.Mutex
	launcherSel *launcherExe
)

// selfLauncher re-executes the running binary, which called Main.
func selfLauncher(why string) *launcherExe {
	d := "re-exec of this binary (/proc/self/exe)"
	if why != "" {
		d += ": " + why
	}
	return &launcherExe{path: "/proc/self/exe", detail: d}
}

// currentLauncher is the dedicated launcher next to the executable when its
// hash matches the one linked in, else the running binary.
func currentLauncher() *launcherExe {
	launcherMu.Lock()
	defer launcherMu.Unlock()
	if launcherSel == nil {
		launcherSel = findLauncher()
	}
	return launcherSel
}

func findLauncher() *launcherExe {
	if launcherSHA256 == "" {
		return selfLauncher("")
	}
	exe, err := os.Executable()
	if err != nil {
		return selfLauncher("cannot find the executable: " + err.Error())
	}
	l, err := openLauncher(filepath.Join(filepath.Dir(exe), LauncherName), launcherSHA256)
	if err != nil {
		return selfLauncher(err.Error())
	}
	return l
}

// UseLauncher makes Command start path as every sandbox's launcher (a
// build of cmd/sandbox-init from the same sources). The file is opened
// once, must be a regular file writable by nobody but its owner (this
// user or root), and must hash to wantSHA256 when that is not empty; it
// runs from a sealed in-memory copy, so the bytes checked are the bytes
// executed, whatever happens to the file afterwards. An empty path goes back to re-executing this binary.
func UseLauncher(path, wantSHA256 string) error {
	var l *launcherExe
	if path == "" {
		l = selfLauncher("")
	} else {
		var err error
		if l, err = openLauncher(path, wantSHA256); err != nil {
			return err
		}
	}
	launcherMu.Lock()
	old := launcherSel
	launcherSel = l
	launcherMu.Unlock()
	if old != nil && old.fd != nil {
		old.fd.Close()
	}
	return nil
}

func openLauncher(path, wantSHA256 string) (*launcherExe, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("launcher %s: %w", path, err)
	}
	fail := func(msg string) (*launcherExe, error) {
		f.Close()
		return nil, fmt.Errorf("launcher %s: %s", path, msg)
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err.Error())
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.Mode().IsRegular():
		return fail("not a regular file")
	case st.Mode().Perm()&0o022 != 0:
		return fail(fmt.Sprintf("writable by group or others (%v)", st.Mode().Perm()))
	case sys == nil || (int(sys.Uid) != os.Geteuid() && sys.Uid != 0):
		return fail("owned by another user")
	}
	// The launcher runs from a sealed copy in memory: what was hashed is
	// what runs, whoever can write the file later.
	mfd, err := unix.MemfdCreate("agentkernel-sandbox-init", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // before Linux 6.3: no MFD_EXEC, memfds are executable
		mfd, err = unix.MemfdCreate("agentkernel-sandbox-init", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return fail("memfd: " + err.Error())
	}
	mem := os.NewFile(uintptr(mfd), "agentkernel-sandbox-init")
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(h, mem), f); err != nil {
		mem.Close()
		return fail(err.Error())
	}
	f.Close()
	sum := hex.EncodeToString(h.Sum(nil))
	if wantSHA256 != "" && sum != wantSHA256 {
		mem.Close()
		return nil, fmt.Errorf("launcher %s: sha256 %s, the kernel was built with %s (run make build)", path, sum, wantSHA256)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(mem.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		mem.Close()
		return nil, fmt.Errorf("launcher %s: seal the copy: %w", path, err)
	}
	// A high descriptor: exec.Cmd moves the child's stdio and ExtraFiles
	// to 0..4, which must not clobber it before the execve.
	nfd, err := unix.FcntlInt(mem.Fd(), unix.F_DUPFD_CLOEXEC, 100)
	mem.Close()
	if err != nil {
		return nil, fmt.Errorf("launcher %s: %w", path, err)
	}
	fd := os.NewFile(uintptr(nfd), path)
	return &launcherExe{
		path:   "/proc/self/fd/" + strconv.Itoa(nfd),
		detail: fmt.Sprintf("dedicated launcher %s (sha256 %s)", path, sum[:12]),
		fd:     fd,
	}, nil
}

// errLauncherProto is reported by a launcher started with another spec version.
var errLauncherProto = errors.New("the sandbox launcher was built from other sources than the kernel (run make build)")
