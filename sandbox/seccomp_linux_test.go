//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSeccompProgram runs the filter in x/net/bpf's VM on hand-made
// seccomp_data: each case is a system call the filter must allow or
// refuse, including the tricks around a deny list (another
// architecture's calls, garbage in an int argument's high bits).
func TestSeccompProgram(t *testing.T) {
	raw, err := seccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	errno := func(e unix.Errno) int { return int(unix.SECCOMP_RET_ERRNO | uint32(e)) }
	allow, kill := int(unix.SECCOMP_RET_ALLOW), int(unix.SECCOMP_RET_KILL_PROCESS)
	const i386 = unix.AUDIT_ARCH_I386
	cases := []struct {
		name string
		arch uint32
		nr   uint32
		args []uint64
		want int
	}{
		{"read", seccompArch, unix.SYS_READ, nil, allow},
		{"another architecture", i386, 26 /* ptrace on i386 */, nil, kill},
		{"ptrace seize", seccompArch, unix.SYS_PTRACE, []uint64{unix.PTRACE_SEIZE, 1}, errno(unix.EPERM)},
		{"ptrace attach", seccompArch, unix.SYS_PTRACE, []uint64{unix.PTRACE_ATTACH, 1}, errno(unix.EPERM)},
		{"ptrace traceme", seccompArch, unix.SYS_PTRACE, []uint64{unix.PTRACE_TRACEME}, allow},
		{"ptrace detach", seccompArch, unix.SYS_PTRACE, []uint64{unix.PTRACE_DETACH, 5}, allow},
		{"ptrace traceme with high bits", seccompArch, unix.SYS_PTRACE, []uint64{1 << 32}, errno(unix.EPERM)},
		{"pidfd_getfd", seccompArch, unix.SYS_PIDFD_GETFD, []uint64{3, 4, 0}, errno(unix.EPERM)},
		{"process_vm_writev", seccompArch, unix.SYS_PROCESS_VM_WRITEV, nil, errno(unix.EPERM)},
		{"io_uring_setup", seccompArch, unix.SYS_IO_URING_SETUP, nil, errno(unix.EPERM)},
		{"clone3", seccompArch, unix.SYS_CLONE3, nil, errno(unix.ENOSYS)},
		{"clone a thread", seccompArch, unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, allow},
		{"clone a user namespace", seccompArch, unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER}, errno(unix.EPERM)},
		{"unshare a mount namespace", seccompArch, unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWNS}, errno(unix.EPERM)},
		{"unshare files", seccompArch, unix.SYS_UNSHARE, []uint64{unix.CLONE_FILES}, allow},
		{"socket unix", seccompArch, unix.SYS_SOCKET, []uint64{unix.AF_UNIX}, allow},
		{"socket inet6", seccompArch, unix.SYS_SOCKET, []uint64{unix.AF_INET6}, allow},
		{"socket netlink", seccompArch, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK}, allow},
		{"socket vsock", seccompArch, unix.SYS_SOCKET, []uint64{unix.AF_VSOCK}, errno(unix.EAFNOSUPPORT)},
		{"socket vsock, high bits set", seccompArch, unix.SYS_SOCKET, []uint64{1<<32 | unix.AF_VSOCK}, errno(unix.EAFNOSUPPORT)},
		{"socketpair alg", seccompArch, unix.SYS_SOCKETPAIR, []uint64{unix.AF_ALG}, errno(unix.EAFNOSUPPORT)},
		{"mount", seccompArch, unix.SYS_MOUNT, nil, errno(unix.EPERM)},
	}
	if seccompX32 != 0 {
		cases = append(cases, struct {
			name string
			arch uint32
			nr   uint32
			args []uint64
			want int
		}{"x32 call", seccompArch, seccompX32 | unix.SYS_READ, nil, errno(unix.ENOSYS)})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := vm.Run(seccompData(c.arch, c.nr, c.args))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("filter returned %#x, want %#x", got, c.want)
			}
		})
	}
}

// seccompData lays out struct seccomp_data for the VM, which loads words
// big endian where the kernel loads them native: each 32-bit word is
// written big endian at its offset, so the VM sees the kernel's values.
func seccompData(arch, nr uint32, args []uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNR:], nr)
	binary.BigEndian.PutUint32(b[offArch:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[argLo(i):], uint32(a))
		binary.BigEndian.PutUint32(b[argHi(i):], uint32(a>>32))
	}
	return b
}
