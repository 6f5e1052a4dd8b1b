//go:build !linux

package serve

import (
	"errors"
	"net"
	"time"
)

// setPeerTimeout is a no-op where there is no TCP_USER_TIMEOUT: keep-alive
// probes (Go's defaults) and the write timeout find a vanished peer.
func setPeerTimeout(*net.TCPConn, time.Duration) error { return nil }

func peerTimeout(*net.TCPConn) (time.Duration, error) {
	return 0, errors.New("no TCP_USER_TIMEOUT here")
}
