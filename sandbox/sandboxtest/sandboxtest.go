// Package sandboxtest holds what the sandbox's attack tests share across
// packages.
package sandboxtest

import (
	"net"
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
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}
