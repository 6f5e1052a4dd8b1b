package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says where a Dialer or a Client may connect. The zero value
// allows nothing. A Config must not be modified once a Dialer uses it.
type Config struct {
	// Hosts are the hosts that may be dialed: "api.example.com",
	// "*.example.com" (any name below example.com, not example.com itself),
	// an IP address ("10.0.0.7", "[fd00::7]"), each optionally with a port
	// ("api.example.com:8443"). A host without a port may be dialed on 80
	// and 443. Names are compared without case and without a trailing dot.
	Hosts []string
	// Networks are the non-public address ranges (see Classify) the dialer
	// may connect to nonetheless, e.g. 10.20.0.0/16 for an internal
	// service. A cloud metadata address is reached only through a prefix
	// of that single address.
	Networks []netip.Prefix
	// InsecureSkipVerify turns off TLS certificate verification. The caller
	// exposes it as a named setting and logs it when it is on.
	InsecureSkipVerify bool
	// RootCAs, when set, are the certificate authorities TLS servers are
	// verified against instead of the system's.
	RootCAs *x509.CertPool
	// MaxRedirects caps the redirects a Client follows (0:
	// DefaultMaxRedirects; negative: none are followed, the redirect is the
	// answer).
	MaxRedirects int
	// SensitiveHeaders are request headers (credentials) a Client drops
	// when a redirect goes to another host; Authorization, Cookie and
	// Proxy-Authorization always are.
	SensitiveHeaders []string
	// DialTimeout bounds one connection attempt (0: DefaultDialTimeout).
	DialTimeout time.Duration
	// Resolver resolves names (nil: the system's, net.DefaultResolver).
	Resolver Resolver
	// Network makes the connections (nil: the operating system's). Tests
	// give one that leads every address to a local server.
	Network Network
}

// Defaults of the zero Config fields.
const (
	DefaultMaxRedirects = 5
	DefaultDialTimeout  = 10 * time.Second
)

// Resolver resolves a host name to addresses. *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Network makes a connection to an address the Dialer chose. It must call
// control with the network ("tcp4" or "tcp6") and the address ("ip:port")
// before sending anything, and fail with control's error: that call is the
// address check. net.Dialer does it through its Control field; a test's
// Network calls it itself.
type Network interface {
	Dial(ctx context.Context, network, address string, control func(network, address string, c syscall.RawConn) error) (net.Conn, error)
}

// systemNetwork is the operating system's network.
type systemNetwork struct{ timeout time.Duration }

func (n systemNetwork) Dial(ctx context.Context, network, address string, control func(string, string, syscall.RawConn) error) (net.Conn, error) {
	d := net.Dialer{Timeout: n.timeout, KeepAlive: 30 * time.Second, Control: control}
	return d.DialContext(ctx, network, address)
}

// hostRule is one entry of Config.Hosts.
type hostRule struct {
	name     string // lower case, no trailing dot; for a wildcard, the suffix with its dot (".example.com")
	wildcard bool
	ports    []string
}

// Dialer dials only where its Config allows (see the package doc). It is
// safe for concurrent use.
type Dialer struct {
	hosts    []hostRule
	networks []netip.Prefix
	resolver Resolver
	network  Network

	mu sync.Mutex
	// public remembers the names that resolved to public addresses (for
	// the rebinding rule), with when they last did.
	public map[string]time.Time
}

// rebindingMemory is how long a name's public answer counts against a
// later internal one.
const rebindingMemory = time.Hour

// maxRemembered bounds Dialer.public.
const maxRemembered = 4096

// NewDialer checks c and returns its Dialer. An error names the bad entry.
func NewDialer(c Config) (*Dialer, error) {
	if len(c.Hosts) == 0 {
		return nil, errors.New("no hosts: list the hosts the client may connect to")
	}
	d := &Dialer{networks: slices.Clone(c.Networks), resolver: c.Resolver, network: c.Network, public: map[string]time.Time{}}
	for i, h := range c.Hosts {
		r, err := parseHost(h)
		if err != nil {
			return nil, fmt.Errorf("hosts[%d]: %w", i, err)
		}
		d.hosts = append(d.hosts, r)
	}
	for i, p := range c.Networks {
		if !p.IsValid() {
			return nil, fmt.Errorf("networks[%d]: not a CIDR prefix", i)
		}
		d.networks[i] = p.Masked()
	}
	if d.resolver == nil {
		d.resolver = net.DefaultResolver
	}
	if d.network == nil {
		d.network = systemNetwork{timeout: orDefault(c.DialTimeout, DefaultDialTimeout)}
	}
	return d, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// ParseHost checks one Config.Hosts entry.
func ParseHost(s string) error {
	_, err := parseHost(s)
	return err
}

func parseHost(s string) (hostRule, error) {
	if strings.TrimSpace(s) != s || s == "" {
		return hostRule{}, fmt.Errorf("%q is not a host", s)
	}
	if strings.ContainsAny(s, "/?#@ ") {
		return hostRule{}, fmt.Errorf("%q is not a host (write the host alone, e.g. api.example.com or api.example.com:8443, not a URL)", s)
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return hostRule{}, fmt.Errorf("%q: %q is not a port (1-65535)", s, p)
		}
	} else if strings.Count(s, ":") > 1 {
		return hostRule{}, fmt.Errorf("%q: write an IPv6 address in brackets ([%s])", s, s)
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	r := hostRule{name: host, ports: []string{"80", "443"}}
	if port != "" {
		r.ports = []string{port}
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if rest == "" || strings.Contains(rest, "*") || !strings.Contains(rest, ".") {
			return hostRule{}, fmt.Errorf("%q: a wildcard covers the names below a domain of two labels or more (*.example.com)", s)
		}
		r.name, r.wildcard = "."+rest, true
		return r, nil
	}
	if strings.Contains(host, "*") {
		return hostRule{}, fmt.Errorf("%q: a wildcard is only allowed as the first label (*.example.com)", s)
	}
	return r, nil
}

// Allowed checks host (a name or an IP address, without brackets) and
// port against the Config's hosts, as DialContext does first.
func (d *Dialer) Allowed(host, port string) error {
	return d.allowed(strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), "."), port)
}

// allowed checks host (lower case, no brackets) and port against the hosts.
func (d *Dialer) allowed(host, port string) error {
	portOK := false
	for _, r := range d.hosts {
		match := host == r.name
		if r.wildcard {
			match = strings.HasSuffix(host, r.name) && len(host) > len(r.name)
		}
		if !match {
			continue
		}
		if slices.Contains(r.ports, port) {
			return nil
		}
		portOK = true
	}
	hp := net.JoinHostPort(host, port)
	if portOK {
		return &RefusedError{Rule: RulePort, Host: hp, Reason: fmt.Sprintf("%s is allowed, but not on port %s: add %s to the hosts", host, port, hp)}
	}
	return &RefusedError{Rule: RuleHost, Host: hp, Reason: fmt.Sprintf("%s is not one of the hosts this client may connect to (%s)", host, d.hostList())}
}

func (d *Dialer) hostList() string {
	var out []string
	for _, r := range d.hosts {
		n := r.name
		if r.wildcard {
			n = "*" + n
		}
		out = append(out, n)
	}
	return strings.Join(out, ", ")
}

// DialContext connects to address ("host:port") if the Config allows it:
// the host and port are checked, the name resolved once, the answer
// checked for rebinding, and each of its addresses tried in turn, each
// checked again by the Network's control call before it is connected.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if err := d.allowed(host, port); err != nil {
		return nil, err
	}
	addrs, err := d.resolve(ctx, network, host)
	if err != nil {
		return nil, err
	}
	var first error
	for _, a := range addrs {
		nw := "tcp4"
		if !a.Is4() && !a.Is4In6() {
			nw = "tcp6"
		}
		if network == "tcp4" && nw == "tcp6" || network == "tcp6" && nw == "tcp4" {
			continue
		}
		hp := net.JoinHostPort(host, port)
		conn, err := d.network.Dial(ctx, nw, netip.AddrPortFrom(a, portNum(port)).String(), func(_, addr string, _ syscall.RawConn) error {
			return d.control(hp, addr)
		})
		if err == nil {
			return conn, nil
		}
		if first == nil || errors.Is(err, ErrRefused) && !errors.Is(first, ErrRefused) {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if first == nil {
		first = fmt.Errorf("%s: no %s address", host, network)
	}
	return nil, first
}

func portNum(p string) uint16 {
	n, _ := strconv.Atoi(p)
	return uint16(n)
}

// control is the address check, run for every connection after its socket
// exists and before it connects: addr is the "ip:port" being dialed, host
// what was asked for.
func (d *Dialer) control(host, addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("egress: cannot check address %q: %w", addr, err)
	}
	return checkAddr(ap.Addr(), host, d.networks)
}

// resolve returns the addresses of host (an IP address is its own answer)
// and applies the rebinding rule to the answer.
func (d *Dialer) resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	nw := "ip"
	switch network {
	case "tcp4":
		nw = "ip4"
	case "tcp6":
		nw = "ip6"
	}
	addrs, err := d.resolver.LookupNetIP(ctx, nw, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: the name has no address", host)
	}
	var public, internal []netip.Addr
	for _, a := range addrs {
		if Classify(a) == "" {
			public = append(public, a)
		} else {
			internal = append(internal, a)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	seen, wasPublic := d.public[host]
	wasPublic = wasPublic && now.Sub(seen) < rebindingMemory
	switch {
	case len(public) > 0 && len(internal) > 0:
		return nil, &RefusedError{Rule: RuleRebinding, Host: host, Addr: internal[0],
			Reason: fmt.Sprintf("%s resolves to public %s and to %s (%s) at once: refused as DNS rebinding", host, public[0], internal[0], describe(Classify(internal[0])))}
	case len(internal) > 0 && wasPublic:
		return nil, &RefusedError{Rule: RuleRebinding, Host: host, Addr: internal[0],
			Reason: fmt.Sprintf("%s resolved to a public address at %s and resolves to %s (%s) now: refused as DNS rebinding (if the name moved for good, reload the tools)",
				host, seen.Format(time.TimeOnly), internal[0], describe(Classify(internal[0])))}
	case len(public) > 0:
		if len(d.public) >= maxRemembered {
			clear(d.public)
		}
		d.public[host] = now
	}
	return addrs, nil
}
