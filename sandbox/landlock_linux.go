package sandbox

import (
	"errors"
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The access rights of go-landlock's RODirs, RWDirs, ROFiles and RWFiles
// (its own sets are unexported); each rule gets them intersected with
// what the ABI's config handles, as go-landlock does.
const (
	llRead   = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	llWrite  = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSTruncate
	llFile   = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSReadFile
	llRODirs = llRead
	llRWDirs = llRead | llWrite
	llROFile = llRead & llFile
	llRWFile = (llRead | llWrite) & llFile
)

// llRule is one rule of the launcher's Landlock ruleset: fs rights
// beneath a place, or TCP rights on a port.
type llRule struct {
	path string // opened here when fd < 0
	name string // the granted path, named in errors (path when empty)
	// fd, when >= 0, is the place itself (the caller's descriptor,
	// opened with no link on the way; see rulePath).
	fd        int
	fs        uint64
	missingOK bool // a path that does not exist is skipped
	port      uint16
	net       uint64
}

func llPath(path string, fs uint64) llRule { return llRule{path: path, fd: -1, fs: fs} }

func (r llRule) named() string {
	if r.name != "" {
		return r.name
	}
	return r.path
}

// restrictThread sets no_new_privs and enforces cfg with rules on the
// calling OS thread only, which must be locked to its goroutine and is
// the one the program is forked from: fork copies the forking thread's
// no_new_privs, seccomp filter and Landlock domain into the program,
// and exec keeps them (RATIONALE.md, "The sandbox's cold start, fifth
// round"). Any error fails the start.
func restrictThread(cfg landlock.Config, rules []llRule) error {
	attr := ll.RulesetAttr{
		HandledAccessFS:  uint64(cfg.HandledAccessFS),
		HandledAccessNet: uint64(cfg.HandledAccessNet),
		Scoped:           uint64(cfg.Scoped),
	}
	rs, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("create the ruleset (%v): %w", cfg, err)
	}
	defer unix.Close(rs)
	for _, r := range rules {
		if r.net != 0 {
			if err := ll.LandlockAddNetPortRule(rs, &ll.NetPortAttr{AllowedAccess: r.net, Port: uint64(r.port)}, 0); err != nil {
				return fmt.Errorf("port %d: %w", r.port, err)
			}
			continue
		}
		access := r.fs & attr.HandledAccessFS
		if access == 0 {
			continue
		}
		fd := r.fd
		if fd < 0 {
			fd, err = unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				if r.missingOK && errors.Is(err, unix.ENOENT) {
					continue
				}
				return fmt.Errorf("%s: %w", r.named(), err)
			}
		}
		err = ll.LandlockAddPathBeneathRule(rs, &ll.PathBeneathAttr{ParentFd: fd, AllowedAccess: access}, 0)
		if r.fd < 0 {
			unix.Close(fd)
		}
		if err != nil {
			if errors.Is(err, unix.EINVAL) {
				err = fmt.Errorf("directory rights on a file? %w", err)
			}
			return fmt.Errorf("%s: add the rule: %w", r.named(), err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(rs, 0); err != nil {
		return fmt.Errorf("restrict the launcher's thread: %w", err)
	}
	return nil
}
