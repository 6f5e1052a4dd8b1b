//go:build unix

package sdk

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	plugin "github.com/hashicorp/go-plugin"
)

// takeOverStdout keeps the host's stdout pipe for the handshake line alone.
// It moves the pipe to a private close-on-exec descriptor, points fd 1 at
// stderr, and returns the write end of a pipe that Serve installs as
// os.Stdout. go-plugin writes its handshake line to os.Stdout; a goroutine
// passes that one line to the host and everything else to stderr.
//
// cert, when not empty, is the SDK's TLS certificate (serverTLS), which the
// goroutine puts into the handshake line's empty sixth field.
func takeOverStdout(stderr *os.File, cert string) (*os.File, error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("dup stdout: %w", err)
	}
	syscall.CloseOnExec(fd)
	if err := dup2(2, 1); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("point stdout at stderr: %w", err)
	}
	host := os.NewFile(uintptr(fd), "handshake")
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = host.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	// This goroutine lives as long as the process: writers that captured
	// os.Stdout before Serve keep writing to pw, and it sends them to stderr.
	go forwardStdout(pr, host, stderr, cert)
	return pw, nil
}

// handshakePrefix starts go-plugin's handshake line:
// "<core version>|<protocol version>|<network>|<address>|grpc|<cert>".
var handshakePrefix = []byte(fmt.Sprintf("%d|%d|", plugin.CoreProtocolVersion, ProtocolVersion))

func isHandshake(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, handshakePrefix)
	return ok && (bytes.HasPrefix(rest, []byte("unix|")) || bytes.HasPrefix(rest, []byte("tcp|")))
}

// fillsHandshakeCert: forwardStdout puts the SDK's certificate into the
// handshake line.
const fillsHandshakeCert = true

// withCert returns the handshake line with cert in its sixth field, where
// go-plugin left that field empty (it writes its own certificate there
// only when it made the TLS configuration itself).
func withCert(line []byte, cert string) []byte {
	if cert == "" {
		return line
	}
	parts := bytes.Split(bytes.TrimSuffix(line, []byte("\n")), []byte("|"))
	if len(parts) < 6 || len(parts[5]) != 0 {
		return line
	}
	parts[5] = []byte(cert)
	return append(bytes.Join(parts, []byte("|")), '\n')
}

// forwardStdout copies r line by line: the first handshake line goes to
// host (with cert filled in: withCert), which is then closed; everything
// else goes to stderr.
func forwardStdout(r io.Reader, host, stderr io.WriteCloser, cert string) {
	br := bufio.NewReaderSize(r, 64<<10)
	sent := false
	for {
		line, err := br.ReadSlice('\n')
		if !sent && err == nil {
			if i := bytes.Index(line, handshakePrefix); i >= 0 && isHandshake(line[i:]) {
				_, _ = stderr.Write(line[:i])
				_, _ = host.Write(withCert(line[i:], cert))
				_ = host.Close()
				sent = true
				continue
			}
		}
		_, _ = stderr.Write(line)
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// watchParent exits the process, killing its process group, once the host
// that started it is gone (the plugin is re-parented). On Linux the host
// also sets a parent-death signal; this covers the other systems and
// plugins whose parent-death signal was lost.
func watchParent() {
	ppid := os.Getppid()
	if ppid <= 1 {
		return
	}
	// Lives as long as the process.
	go func() {
		for range time.Tick(500 * time.Millisecond) {
			if os.Getppid() != ppid {
				if pid := os.Getpid(); syscall.Getpgrp() == pid {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
				os.Exit(1)
			}
		}
	}()
}
