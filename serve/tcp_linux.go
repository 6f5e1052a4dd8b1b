package serve

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setPeerTimeout sets TCP_USER_TIMEOUT: data unacknowledged for d drops
// the connection (the peer vanished), whatever TCP's retransmission
// defaults (about 15 minutes) would say.
func setPeerTimeout(c *net.TCPConn, d time.Duration) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}

// peerTimeout reads TCP_USER_TIMEOUT back (for tests).
func peerTimeout(c *net.TCPConn) (time.Duration, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var ms int
	var serr error
	err = raw.Control(func(fd uintptr) {
		ms, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	})
	if err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, serr
}
