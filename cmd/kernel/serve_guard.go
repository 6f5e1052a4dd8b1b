package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"net"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/serve"
)

// serveGuardFlags are kernel serve's flags for what one client may hold
// and which names the server answers to (docs/serve.md, "Limits" and
// "Host names").
type serveGuardFlags struct {
	allowHosts    stringList
	maxStreams    *int
	maxStreamsKey *int
	streamReserve *int
	streamMaxAge  *time.Duration
	peerTimeout   *time.Duration
}

func (g *serveGuardFlags) register(fs *flag.FlagSet) {
	fs.Var(&g.allowHosts, "allow-host", "a host `NAME` the server answers to besides IP addresses, localhost and its TLS certificate's names (a proxy's public name); repeatable. Other Host headers are refused (DNS rebinding)")
	g.maxStreams = fs.Int("max-streams", 4096, "open event streams, all keys together (more: 429)")
	g.maxStreamsKey = fs.Int("max-streams-per-key", 64, "open event streams of one key (more: 429)")
	g.streamReserve = fs.Int("stream-reserve", 0, "of --max-streams, how many only keys with the approve scope may open (default one sixteenth)")
	g.streamMaxAge = fs.Duration("stream-max-age", time.Hour, "end an event stream after it has been open this long (the client reconnects)")
	g.peerTimeout = fs.Duration("peer-timeout", 45*time.Second, "drop a connection whose client stopped acknowledging data for this long")
}

// limits are serve.Limits from the flags and the run limits.
func (g *serveGuardFlags) limits(maxRuns, maxRunsKey int, maxBody int64) serve.Limits {
	return serve.Limits{MaxRuns: maxRuns, MaxRunsPerKey: maxRunsKey, MaxBodyBytes: maxBody,
		MaxStreams: *g.maxStreams, MaxStreamsPerKey: *g.maxStreamsKey, StreamReserve: *g.streamReserve,
		StreamMaxAge: *g.streamMaxAge, PeerTimeout: *g.peerTimeout}
}

// allowedHosts are the names the server answers to: --allow-host, the
// host of --listen when it is a name, and the DNS names of the TLS
// certificate (a browser checks those, so a rebinding page cannot use
// them).
func (g *serveGuardFlags) allowedHosts(listen string, cert *tls.Certificate) []string {
	out := append([]string(nil), g.allowHosts...)
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" && net.ParseIP(h) == nil {
		out = append(out, h)
	}
	if cert != nil && len(cert.Certificate) > 0 {
		leaf := cert.Leaf
		if leaf == nil {
			leaf, _ = x509.ParseCertificate(cert.Certificate[0])
		}
		if leaf != nil {
			for _, n := range leaf.DNSNames {
				if !strings.HasPrefix(n, "*.") {
					out = append(out, n)
				}
			}
		}
	}
	return out
}
