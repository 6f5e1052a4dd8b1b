package egress

import (
	"errors"
	"fmt"
	"net/netip"
)

// The rules a connection can be refused by. RefusedError.Rule is one of
// them.
const (
	// Address rules: the address a name resolved to (or an IP in a URL) is
	// in a range the kernel does not reach unless Config.Networks grants it.
	RuleLoopback    = "loopback"    // 127.0.0.0/8, ::1
	RulePrivate     = "private"     // 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7
	RuleLinkLocal   = "link_local"  // 169.254/16, fe80::/10
	RuleMetadata    = "metadata"    // cloud metadata services: 169.254.169.254 and kin
	RuleUnspecified = "unspecified" // 0.0.0.0/8, ::
	RuleMulticast   = "multicast"   // 224/4, ff00::/8
	RuleReserved    = "reserved"    // 240/4, broadcast, 192.0.0.0/24, 198.18/15, IPv4-compatible IPv6
	// RuleHost: the host is not in Config.Hosts.
	RuleHost = "host"
	// RulePort: the host is, but not on this port.
	RulePort = "port"
	// RuleRebinding: a name that resolved to public addresses resolves to
	// an internal one now, or to both at once.
	RuleRebinding = "rebinding"
	// RuleRedirects: more redirects than Config.MaxRedirects.
	RuleRedirects = "max_redirects"
	// RuleDowngrade: a redirect from https to http.
	RuleDowngrade = "downgrade"
)

// ErrRefused is matched (errors.Is) by every *RefusedError.
var ErrRefused = errors.New("egress refused")

// RefusedError is a connection or a redirect the guard refused.
type RefusedError struct {
	// Rule is one of the Rule constants.
	Rule string
	// Host is the host (and port) asked for; Addr the address it resolved
	// to, when the refusal is about an address.
	Host string
	Addr netip.Addr
	// Reason says what was wrong and how to allow it, if it can be.
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("egress refused (rule %s): %s", e.Rule, e.Reason)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// classes are the non-public ranges, most specific first: a metadata
// address is also link-local, and it is the metadata rule that applies.
var classes = []struct {
	rule     string
	prefixes []netip.Prefix
}{
	{RuleMetadata, prefixes(
		"169.254.169.254/32", // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean
		"169.254.170.2/32",   // AWS ECS task metadata
		"169.254.169.253/32", // AWS Route 53 resolver in a VPC
		"100.100.100.200/32", // Alibaba Cloud
		"fd00:ec2::254/128",  // AWS over IPv6
		"fd00:ec2::23/128",   // AWS time sync, IPv6 metadata neighbour
	)},
	{RuleUnspecified, prefixes("0.0.0.0/8", "::/128")},
	{RuleLoopback, prefixes("127.0.0.0/8", "::1/128")},
	{RuleLinkLocal, prefixes("169.254.0.0/16", "fe80::/10")},
	{RulePrivate, prefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")},
	{RuleMulticast, prefixes("224.0.0.0/4", "ff00::/8")},
	{RuleReserved, prefixes("240.0.0.0/4", "192.0.0.0/24", "198.18.0.0/15", "::/96", "100::/64")},
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Embedded IPv4 in IPv6: what the address really reaches.
var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	nat64l  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	ipv4Map = netip.MustParsePrefix("::ffff:0:0/96")
)

// effective returns the IPv4 address an IPv6 one reaches through a
// well-known mapping or translation (::ffff:a.b.c.d, NAT64, 6to4), else a
// itself.
func effective(a netip.Addr) netip.Addr {
	a = a.WithZone("")
	if !a.Is6() {
		return a
	}
	b := a.As16()
	switch {
	case ipv4Map.Contains(a), nat64.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case nat64l.Contains(a):
		// RFC 8215 local-use prefix: the IPv4 address sits in the last 32 bits too.
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case sixTo4.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	}
	return a
}

// Classify returns the rule that refuses a by default ("" for a public
// address): RuleLoopback for 127.0.0.1, RuleMetadata for 169.254.169.254,
// and so on, looking through IPv4-mapped, NAT64 and 6to4 addresses to the
// IPv4 address they reach.
func Classify(a netip.Addr) string {
	e := effective(a)
	if e.Is4() && e.As4() == [4]byte{255, 255, 255, 255} {
		return RuleReserved
	}
	for _, c := range classes {
		for _, p := range c.prefixes {
			if p.Contains(e) {
				return c.rule
			}
		}
	}
	return ""
}

// describe is the rule in words, for messages.
func describe(rule string) string {
	switch rule {
	case RuleLoopback:
		return "a loopback address"
	case RulePrivate:
		return "a private-network address"
	case RuleLinkLocal:
		return "a link-local address"
	case RuleMetadata:
		return "a cloud metadata service's address"
	case RuleUnspecified:
		return "an unspecified address"
	case RuleMulticast:
		return "a multicast address"
	case RuleReserved:
		return "a reserved address"
	}
	return "an address"
}

// checkAddr returns nil when networks allow connecting to a, else the
// refusal; host names what was asked for, for the message.
func checkAddr(a netip.Addr, host string, networks []netip.Prefix) error {
	rule := Classify(a)
	if rule == "" {
		return nil
	}
	e := effective(a)
	for _, p := range networks {
		if !p.Contains(e) && !p.Contains(a.WithZone("")) {
			continue
		}
		// A metadata service holds the machine's credentials: only a
		// grant of that one address reaches it, never a range around it.
		if rule == RuleMetadata && !p.IsSingleIP() {
			continue
		}
		return nil
	}
	how := fmt.Sprintf("grant it with egress networks: [%s]", netip.PrefixFrom(e, e.BitLen()))
	if rule == RuleMetadata {
		how = fmt.Sprintf("it can only be granted by itself: egress networks: [%s]", netip.PrefixFrom(e, e.BitLen()))
	}
	shown := a.String()
	if e != a {
		shown = fmt.Sprintf("%s (which reaches %s)", a, e)
	}
	return &RefusedError{Rule: rule, Host: host, Addr: a,
		Reason: fmt.Sprintf("%s: %s is %s; %s", host, shown, describe(rule), how)}
}
