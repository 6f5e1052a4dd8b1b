// Package egresstest holds the fakes the tests of egress clients use: a
// resolver answering from a table, and a network that leads every checked
// connection to a local test server, so no test ever sends a packet to an
// address other than loopback, whatever address the guard is asked about.
package egresstest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
)

// Resolver answers names from a table. A name set with several answers
// gets them in turn, the last one repeating: "public first, internal
// later" is a rebinding name. It is safe for concurrent use.
type Resolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

// Set gives name its answers, in order; each answer is a list of
// addresses ("203.0.113.7", "10.0.0.5").
func (r *Resolver) Set(name string, answers ...[]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answers == nil {
		r.answers, r.calls = map[string][][]netip.Addr{}, map[string]int{}
	}
	var as [][]netip.Addr
	for _, ans := range answers {
		var addrs []netip.Addr
		for _, s := range ans {
			addrs = append(addrs, netip.MustParseAddr(s))
		}
		as = append(as, addrs)
	}
	r.answers[name] = as
	r.calls[name] = 0
}

// Calls says how many times name was looked up.
func (r *Resolver) Calls(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[name]
}

// LookupNetIP answers from the table; a name not in it does not exist.
func (r *Resolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	as, ok := r.answers[host]
	if !ok || len(as) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.calls[host], len(as)-1)
	r.calls[host]++
	var out []netip.Addr
	for _, a := range as[i] {
		if network == "ip4" && !a.Is4() || network == "ip6" && a.Is4() {
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// Network leads every connection to Target (a local test server's
// "127.0.0.1:port") after calling the guard's control function with the
// address it was asked for, as net.Dialer does before connect(2): a
// refused address is refused, an allowed one reaches the test server
// instead of the address itself. It is safe for concurrent use.
type Network struct {
	Target string

	mu     sync.Mutex
	dialed []string
}

// Dial checks address with control, records it, and connects to Target.
func (n *Network) Dial(ctx context.Context, network, address string, control func(network, address string, c syscall.RawConn) error) (net.Conn, error) {
	if err := control(network, address, nil); err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.dialed = append(n.dialed, address)
	n.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", n.Target)
	if err != nil {
		return nil, fmt.Errorf("egresstest: %s (for %s): %w", n.Target, address, err)
	}
	return c, nil
}

// Dialed lists the addresses connected to (through Target), in order.
func (n *Network) Dialed() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.dialed...)
}
