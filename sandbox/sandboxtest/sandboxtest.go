// Package sandboxtest holds what the sandbox's attack tests share across
// packages.
package sandboxtest

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// Reply is what a Listener writes to every connection.
const Reply = "reached\n"

// Listener listens on a free port of 127.0.0.1, answers every connection
// with Reply, and stops when the test ends. It returns the port: the
// target of the network attacks, which must fail without a net grant.
func Listener(t testing.TB) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reply(t, ln)
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// reply answers every connection to ln with Reply until the test ends.
func reply(t testing.TB, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(Reply))
			c.Close()
		}
	}()
}

// UnixClient (a python3 program: UnixClient STREAM DGRAM) connects to a stream socket and sends one datagram to a
// datagram socket, printing what worked.
const UnixClient = `import socket, sys
stream, dgram = sys.argv[1], sys.argv[2]
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(stream)
    print("stream", s.recv(100).decode().strip())
except Exception as e:
    print("stream refused:", e)
try:
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    d.sendto(b"reached", dgram)
    print("dgram sent")
except Exception as e:
    print("dgram refused:", e)
`

// UnixDaemon listens on a stream and a datagram socket in a new directory
// under base, as a daemon would; got receives the datagrams.
func UnixDaemon(t *testing.T, base string) (dir, stream, dgram string, got chan string) {
	t.Helper()
	dir, err := os.MkdirTemp(base, "agentkernel-daemon-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	stream, dgram = filepath.Join(dir, "daemon.sock"), filepath.Join(dir, "log.sock")
	ln, err := net.Listen("unix", stream)
	if err != nil {
		t.Fatal(err)
	}
	reply(t, ln)
	pc, err := net.ListenPacket("unixgram", dgram)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	got = make(chan string, 16)
	go func() {
		buf := make([]byte, 100)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	return dir, stream, dgram, got
}

// LauncherAttack (python3) tries every way to reach the sandbox's PID 1 (the
// launcher, same uid and Landlock domain): ptrace, its memory, its
// descriptors (through /proc and pidfd_getfd) and its signals. Whatever
// descriptor it gets it writes a forged report into, then exits 7.
const LauncherAttack = `import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
forged = b'{"exited":true,"exit_code":0}'
def report(what, r):
    e = ctypes.get_errno()
    print(what, "ok" if r >= 0 else "denied errno %d" % e, flush=True)
for name, req in (("seize", 0x4206), ("attach", 16)):
    report("ptrace " + name, libc.ptrace(req, 1, None, None))
buf = ctypes.create_string_buffer(64)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
remote = iovec(0x400000, 64)
report("process_vm_readv", libc.syscall(310, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
pidfd = libc.syscall(434, 1, 0)
report("pidfd_open", pidfd)
for fd in range(0, 128):
    try:
        f = os.open("/proc/1/fd/%d" % fd, os.O_WRONLY)
        os.write(f, forged)
        print("proc fd", fd, "ok", flush=True)
    except OSError:
        pass
    if pidfd >= 0:
        got = libc.syscall(438, pidfd, fd, 0)
        if got >= 0:
            print("pidfd_getfd", fd, "ok", flush=True)
            try:
                os.write(got, forged)
            except OSError:
                pass
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
          signal.SIGILL, signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGPIPE, signal.SIGALRM,
          signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSTOP, signal.SIGTSTP, signal.SIGKILL):
    try:
        os.kill(1, s)
    except OSError:
        pass
print("done", flush=True)
sys.exit(7)
`

// SeccompProbe (python3) tries what the seccomp filter takes away.
const SeccompProbe = `import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def report(what, r):
    print(what, "ok" if r >= 0 else "denied errno %d" % ctypes.get_errno(), flush=True)
report("unshare user namespace", libc.unshare(0x10000000))
params = ctypes.create_string_buffer(120)
report("io_uring_setup", libc.syscall(425, 4, params))
report("keyctl", libc.syscall(250, 0, -3, 0))
try:
    socket.socket(40, socket.SOCK_STREAM)
    print("socket vsock ok", flush=True)
except OSError as e:
    print("socket vsock denied errno %d" % e.errno, flush=True)
print("done", flush=True)
`

// MemoryTogether (python3) forks three children that each fill 150 MiB
// (touched, not just reserved) and wait until all three have, so that
// they hold it at the same time; it exits 1 when one was killed.
const MemoryTogether = `import os, signal, sys, time
n = 3
kids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        b = bytearray(b"x") * (150 << 20)
        open("held-%d" % i, "w").close()
        while not all(os.path.exists("held-%d" % j) for j in range(n)):
            time.sleep(0.02)
        os._exit(0)
    kids.append(pid)
failed = 0
for _ in range(n):
    pid, st = os.wait()
    kids.remove(pid)
    if st != 0:
        failed += 1
        for k in kids:
            os.kill(k, signal.SIGKILL)
print("children failed:", failed, flush=True)
sys.exit(1 if failed else 0)
`
