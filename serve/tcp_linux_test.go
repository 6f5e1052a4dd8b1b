package serve

import (
	"net"
	"testing"
	"time"
)

// TestPeerTimeoutSet: every connection the server accepts has
// TCP_USER_TIMEOUT set to Limits.PeerTimeout, so a vanished client's
// streams are dropped after it rather than after TCP's retransmission
// defaults (about 15 minutes). Without peerTimeoutListener the option
// reads 0 (the system's default).
func TestPeerTimeoutSet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wrapped := peerTimeoutListener{Listener: ln, timeout: 7 * time.Second}
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := wrapped.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := peerTimeout(c.(*net.TCPConn))
	if err != nil || got != 7*time.Second {
		t.Fatalf("TCP_USER_TIMEOUT %s (%v), want 7s", got, err)
	}
}
