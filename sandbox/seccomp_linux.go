//go:build linux && (amd64 || arm64)

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The program's seccomp filter (LayerSeccomp). It is a deny list on top of
// the other layers, not the wall they are: it takes away what no tool
// needs and what would reach past the sandbox's init or widen the kernel
// surface a program can attack. Why these and why hand-assembled:
// RATIONALE.md, "A seccomp filter on the program".
//
//   - ptrace, except PTRACE_TRACEME and PTRACE_DETACH (the launcher's own
//     stop of the program after its execve); process_vm_readv/writev,
//     pidfd_getfd, kcmp: no reading, writing or taking another process's
//     memory or descriptors, the launcher's above all (with its
//     PR_SET_DUMPABLE 0, the second wall around it).
//   - unshare and clone with a namespace flag, setns; clone3 (ENOSYS, so
//     libc falls back to clone, whose flags the filter can see): a new
//     user namespace would give the program every capability in it.
//   - io_uring (its operations bypass seccomp), keyrings (not namespaced),
//     bpf, perf_event_open, userfaultfd, the mount API, kexec, modules,
//     syslog, acct, swap, reboot, quotactl.
//   - socket and socketpair outside AF_UNIX, AF_INET, AF_INET6 and
//     AF_NETLINK (EAFNOSUPPORT): AF_VSOCK reaches the hypervisor's host
//     whatever the network namespace, and the rest are kernel surface.
//
// The filter is installed on the launcher's locked thread just before it
// forks the program, which inherits it; the launcher's other threads
// stay unfiltered.

// seccompDenied are refused with EPERM whatever their arguments.
var seccompDenied = []uint32{
	unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD, unix.SYS_KCMP,
	unix.SYS_SETNS,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
	unix.SYS_OPEN_TREE_ATTR,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_SYSLOG, unix.SYS_ACCT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_QUOTACTL,
}

// seccompFamilies are the socket families a program may create.
var seccompFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// nsFlags are the namespace flags of clone and unshare.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// Offsets in struct seccomp_data: nr, arch, then six 64-bit arguments
// (little endian here: the low word first).
const (
	offNR   = 0
	offArch = 4
	offArgs = 16
)

func argLo(i int) uint32 { return uint32(offArgs + 8*i) }
func argHi(i int) uint32 { return uint32(offArgs + 8*i + 4) }

func retErrno(e unix.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)}
}

var (
	retAllow = bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	retKill  = bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS}
)

// seccompProgram assembles the filter: a foreign architecture (i386
// through int 0x80 on amd64) kills the process, x32 calls fail, then one
// block per filtered call; everything else is allowed.
func seccompProgram() ([]bpf.RawInstruction, error) {
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: seccompArch, SkipTrue: 1},
		retKill,
		bpf.LoadAbsolute{Off: offNR, Size: 4},
	}
	if seccompX32 != 0 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: seccompX32, SkipFalse: 1},
			retErrno(unix.ENOSYS))
	}
	// on appends "if nr == sys { block }"; every block ends in a return,
	// so the accumulator still holds nr for the next test.
	on := func(sys uint32, block ...bpf.Instruction) {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: sys, SkipTrue: uint8(len(block))})
		prog = append(prog, block...)
	}
	for _, sys := range seccompDenied {
		on(sys, retErrno(unix.EPERM))
	}
	on(unix.SYS_CLONE3, retErrno(unix.ENOSYS))
	// ptrace(long request, ...): the whole 64 bits count.
	on(unix.SYS_PTRACE,
		bpf.LoadAbsolute{Off: argHi(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 3},
		bpf.LoadAbsolute{Off: argLo(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PTRACE_TRACEME, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PTRACE_DETACH, SkipTrue: 1},
		retErrno(unix.EPERM),
		retAllow)
	// clone(unsigned long flags, ...) and unshare(unsigned long flags):
	// the kernel reads the flags' low 32 bits.
	on(unix.SYS_CLONE,
		bpf.LoadAbsolute{Off: argLo(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: nsFlags, SkipFalse: 1},
		retErrno(unix.EPERM),
		retAllow)
	on(unix.SYS_UNSHARE,
		bpf.LoadAbsolute{Off: argLo(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: nsFlags | unix.CLONE_NEWTIME, SkipFalse: 1},
		retErrno(unix.EPERM),
		retAllow)
	// socket(int family, ...) and socketpair(int family, ...): an int,
	// so the low 32 bits are the family the kernel sees.
	families := []bpf.Instruction{bpf.LoadAbsolute{Off: argLo(0), Size: 4}}
	for i, f := range seccompFamilies {
		families = append(families, bpf.JumpIf{Cond: bpf.JumpEqual, Val: f, SkipTrue: uint8(len(seccompFamilies) - i)})
	}
	families = append(families, retErrno(unix.EAFNOSUPPORT), retAllow)
	on(unix.SYS_SOCKET, families...)
	on(unix.SYS_SOCKETPAIR, families...)
	prog = append(prog, retAllow)
	return bpf.Assemble(prog)
}

// installSeccomp installs the filter on the calling thread (which must be
// locked to its goroutine), with no_new_privs set.
func installSeccomp() error {
	raw, err := seccompProgram()
	if err != nil {
		return fmt.Errorf("seccomp: assemble the filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp: install the filter: %w", errno)
	}
	return nil
}
