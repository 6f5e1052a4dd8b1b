package serve

import (
	"net"
	"time"
)

// peerTimeoutListener sets Limits.PeerTimeout on every TCP connection it
// accepts, with keep-alive probes for an idle one.
type peerTimeoutListener struct {
	net.Listener
	timeout time.Duration
}

func (l peerTimeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3})
		_ = setPeerTimeout(tc, l.timeout) // best effort: the write timeout still holds
	}
	return c, nil
}
