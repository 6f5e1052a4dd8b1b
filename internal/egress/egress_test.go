package egress_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/egress/egresstest"
)

// server is a local HTTP server that records the requests it got; the
// handler answers by the Host header, so one server stands for many hosts.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	got  []string // "host path"
	hand func(w http.ResponseWriter, r *http.Request)
}

func newServer(t *testing.T, hand func(w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{hand: hand}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.got = append(s.got, r.Host+" "+r.URL.Path)
	s.mu.Unlock()
	if s.hand != nil {
		s.hand(w, r)
		return
	}
	io.WriteString(w, "ok")
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func (s *server) addr() string { return strings.TrimPrefix(s.URL, "http://") }

func get(t *testing.T, c *http.Client, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func refusedBy(t *testing.T, err error, rule string) {
	t.Helper()
	var re *egress.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("err = %v, want a refusal by rule %s", err, rule)
	}
	if re.Rule != rule || !strings.Contains(err.Error(), "rule "+rule) {
		t.Fatalf("refused by %q (%v), want rule %s", re.Rule, err, rule)
	}
}

func mustClient(t *testing.T, c egress.Config) *http.Client {
	t.Helper()
	cl, err := egress.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

// TestSSRF: each way to the internal network a declared HTTP tool could
// be led to is refused with the rule that refuses it, and the request
// never reaches the server standing in for the internal host. Each case
// fails if its check is removed: the request then arrives.
func TestSSRF(t *testing.T) {
	type tc struct {
		name     string
		cfg      func(s *server, r *egresstest.Resolver) egress.Config
		url      func(s *server) string
		resolver map[string][][]string
		hand     func(w http.ResponseWriter, r *http.Request)
		// first, when set, is a request that must succeed before url is tried.
		first string
		rule  string
	}
	redirectTo := func(to string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.Host, "api.") {
				http.Redirect(w, r, to, http.StatusFound)
				return
			}
			io.WriteString(w, "internal data")
		}
	}
	cases := []tc{
		{name: "loopback 127.0.0.1", rule: egress.RuleLoopback,
			// The real network: the server listens on 127.0.0.1.
			cfg: func(s *server, _ *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{s.addr()}}
			},
			url: func(s *server) string { return s.URL + "/admin" }},
		{name: "loopback [::1]", rule: egress.RuleLoopback,
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"[::1]:8080"}, Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://[::1]:8080/admin" }},
		{name: "IPv4-mapped loopback", rule: egress.RuleLoopback,
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"[::ffff:127.0.0.1]:8080"}, Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://[::ffff:127.0.0.1]:8080/admin" }},
		{name: "cloud metadata, its range granted", rule: egress.RuleMetadata,
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"169.254.169.254"}, Networks: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")},
					Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://169.254.169.254/latest/meta-data/iam/" }},
		{name: "a name resolving to a private address", rule: egress.RulePrivate,
			resolver: map[string][][]string{"intranet.example.test": {{"10.0.0.5"}}},
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"intranet.example.test"}, Resolver: r, Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://intranet.example.test/" }},
		{name: "a redirect to a private address", rule: egress.RulePrivate,
			resolver: map[string][][]string{"api.example.test": {{"203.0.113.10"}}, "evil.example.test": {{"10.1.2.3"}}},
			hand:     redirectTo("http://evil.example.test/secrets"),
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"*.example.test"}, Resolver: r, Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://api.example.test/start" }},
		{name: "a redirect to a host not allowed", rule: egress.RuleHost,
			resolver: map[string][][]string{"api.example.test": {{"203.0.113.10"}}, "other.test": {{"203.0.113.11"}}},
			hand:     redirectTo("http://other.test/x"),
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"api.example.test"}, Resolver: r, Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://api.example.test/start" }},
		{name: "a rebinding name (public, then loopback, loopback granted)", rule: egress.RuleRebinding,
			resolver: map[string][][]string{"rebind.example.test": {{"203.0.113.20"}, {"127.0.0.1"}}},
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"rebind.example.test"}, Resolver: r, Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
					Network: &egresstest.Network{Target: s.addr()}}
			},
			first: "http://rebind.example.test/warm",
			url:   func(*server) string { return "http://rebind.example.test/admin" }},
		{name: "a name resolving to public and private at once", rule: egress.RuleRebinding,
			resolver: map[string][][]string{"both.example.test": {{"203.0.113.30", "192.168.1.1"}}},
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"both.example.test"}, Resolver: r, Networks: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")},
					Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://both.example.test/admin" }},
		{name: "a port not allowed", rule: egress.RulePort,
			resolver: map[string][][]string{"api.example.test": {{"203.0.113.10"}}},
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"api.example.test"}, Resolver: r, Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://api.example.test:6379/" }},
		{name: "redirects forever", rule: egress.RuleRedirects,
			resolver: map[string][][]string{"api.example.test": {{"203.0.113.10"}}},
			hand: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/again"+r.URL.Path, http.StatusFound)
			},
			cfg: func(s *server, r *egresstest.Resolver) egress.Config {
				return egress.Config{Hosts: []string{"api.example.test"}, Resolver: r, Network: &egresstest.Network{Target: s.addr()}}
			},
			url: func(*server) string { return "http://api.example.test/" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.hand)
			r := &egresstest.Resolver{}
			for name, as := range c.resolver {
				var answers [][]string
				answers = append(answers, as...)
				r.Set(name, answers...)
			}
			cl := mustClient(t, c.cfg(s, r))
			if c.first != "" {
				if resp, err := get(t, cl, c.first); err != nil || resp.StatusCode != 200 {
					t.Fatalf("the first request failed: %v", err)
				}
				cl.CloseIdleConnections() // the next request dials (and resolves) again
			}
			before := len(s.requests())
			_, err := get(t, cl, c.url(s))
			refusedBy(t, err, c.rule)
			got := s.requests()[before:]
			if c.rule == egress.RuleRedirects {
				if len(got) != egress.DefaultMaxRedirects+1 {
					t.Errorf("the server got %d requests, want %d (the first and %d redirects)", len(got), egress.DefaultMaxRedirects+1, egress.DefaultMaxRedirects)
				}
				return
			}
			for _, g := range got {
				if !strings.HasPrefix(g, "api.") {
					t.Errorf("the refused request reached the server: %q (all: %q)", g, got)
				}
			}
		})
	}
}

// TestGrantedNetworkReached: a loopback service granted by
// networks is reached over the real network; the refusals are not a
// blanket block.
func TestGrantedNetworkReached(t *testing.T) {
	s := newServer(t, nil)
	cl := mustClient(t, egress.Config{Hosts: []string{s.addr()}, Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	resp, err := get(t, cl, s.URL+"/x")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("granted loopback: %v", err)
	}
	// A proxy in the environment is not used: the request went straight to the server.
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	cl2 := mustClient(t, egress.Config{Hosts: []string{s.addr()}, Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if _, err := get(t, cl2, s.URL+"/y"); err != nil {
		t.Fatalf("with HTTP_PROXY set: %v", err)
	}
	if got := s.requests(); len(got) != 2 {
		t.Errorf("requests = %q", got)
	}
}

// TestRedirectDropsCredentials: a redirect to another allowed host does not
// carry the request's credential headers, the declared ones included.
func TestRedirectDropsCredentials(t *testing.T) {
	var seen sync.Map
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Host, r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
		if r.Host == "api.example.test" {
			http.Redirect(w, r, "http://cdn.example.test/file", http.StatusFound)
		}
	})
	r := &egresstest.Resolver{}
	r.Set("api.example.test", []string{"203.0.113.10"})
	r.Set("cdn.example.test", []string{"203.0.113.11"})
	cl := mustClient(t, egress.Config{Hosts: []string{"*.example.test"}, Resolver: r, Network: &egresstest.Network{Target: s.addr()}, SensitiveHeaders: []string{"X-Api-Key"}})
	req, _ := http.NewRequest(http.MethodGet, "http://api.example.test/", nil)
	req.Header.Set("X-Api-Key", "k-123456789")
	req.Header.Set("Authorization", "Bearer t-123456789")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v, _ := seen.Load("api.example.test"); v != "k-123456789|Bearer t-123456789" {
		t.Errorf("the first host got %q", v)
	}
	if v, _ := seen.Load("cdn.example.test"); v != "|" {
		t.Errorf("the redirect's host got the credentials: %q", v)
	}
}

// TestTLS: certificates are verified unless the named setting turns it
// off; a redirect from https to http is refused.
func TestTLS(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			http.Redirect(w, r, "http://example.com/plain", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer ts.Close()
	r := &egresstest.Resolver{}
	r.Set("example.com", []string{"203.0.113.40"}) // the test certificate's name
	base := egress.Config{Hosts: []string{"example.com"}, Resolver: r, Network: &egresstest.Network{Target: strings.TrimPrefix(ts.URL, "https://")}}

	if _, err := get(t, mustClient(t, base), "https://example.com/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unknown authority was accepted: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	trusted := base
	trusted.RootCAs = pool
	if resp, err := get(t, mustClient(t, trusted), "https://example.com/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("with its CA: %v", err)
	}
	insecure := base
	insecure.InsecureSkipVerify = true
	if _, err := get(t, mustClient(t, insecure), "https://example.com/"); err != nil {
		t.Fatalf("verification off: %v", err)
	}
	_, err := get(t, mustClient(t, trusted), "https://example.com/down")
	refusedBy(t, err, egress.RuleDowngrade)
}

// TestHosts: entries are checked when the client is built.
func TestHosts(t *testing.T) {
	for _, bad := range []string{"", "https://api.example.com", "api.example.com/v1", "*", "*.com", "a.*.example.com", "api.example.com:0", "::1", "api.example.com:http"} {
		if err := egress.ParseHost(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"api.example.com", "API.Example.com.", "*.example.com", "api.example.com:8443", "10.0.0.7", "[fd00::7]:443"} {
		if err := egress.ParseHost(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	if _, err := egress.NewClient(egress.Config{}); err == nil {
		t.Error("a client without hosts was built")
	}
}

// TestClassify: the ranges, through the IPv6 forms that reach IPv4.
func TestClassify(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": egress.RuleLoopback, "127.8.9.10": egress.RuleLoopback, "::1": egress.RuleLoopback,
		"::ffff:127.0.0.1": egress.RuleLoopback, "64:ff9b::7f00:1": egress.RuleLoopback, "2002:7f00:1::": egress.RuleLoopback,
		"10.1.2.3": egress.RulePrivate, "172.16.0.1": egress.RulePrivate, "192.168.1.1": egress.RulePrivate, "100.64.0.1": egress.RulePrivate,
		"fd12::1": egress.RulePrivate, "::ffff:10.0.0.1": egress.RulePrivate,
		"169.254.1.1": egress.RuleLinkLocal, "fe80::1": egress.RuleLinkLocal, "fe80::1%eth0": egress.RuleLinkLocal,
		"169.254.169.254": egress.RuleMetadata, "fd00:ec2::254": egress.RuleMetadata, "::ffff:169.254.169.254": egress.RuleMetadata, "100.100.100.200": egress.RuleMetadata,
		"0.0.0.0": egress.RuleUnspecified, "::": egress.RuleUnspecified, "224.0.0.1": egress.RuleMulticast, "ff02::1": egress.RuleMulticast,
		"255.255.255.255": egress.RuleReserved, "240.0.0.1": egress.RuleReserved,
		"203.0.113.7": "", "8.8.8.8": "", "2606:4700::1111": "", "172.32.0.1": "",
	} {
		if got := egress.Classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Classify(%s) = %q, want %q", addr, got, want)
		}
	}
}

// TestOneLookupPerDial: the dialer connects to the answer it checked; it
// does not resolve the name again to connect.
func TestOneLookupPerDial(t *testing.T) {
	s := newServer(t, nil)
	r := &egresstest.Resolver{}
	r.Set("api.example.test", []string{"203.0.113.10"})
	nw := &egresstest.Network{Target: s.addr()}
	cl := mustClient(t, egress.Config{Hosts: []string{"api.example.test"}, Resolver: r, Network: nw})
	if _, err := get(t, cl, "http://api.example.test/"); err != nil {
		t.Fatal(err)
	}
	if n := r.Calls("api.example.test"); n != 1 {
		t.Errorf("%d lookups for one connection", n)
	}
	if d := nw.Dialed(); len(d) != 1 || d[0] != "203.0.113.10:80" {
		t.Errorf("dialed %q", d)
	}
}
