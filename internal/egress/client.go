package egress

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"time"
)

// alwaysSensitive are the headers a redirect to another host never
// carries.
var alwaysSensitive = []string{"Authorization", "Cookie", "Proxy-Authorization"}

// NewClient returns an HTTP client whose every connection, redirects
// included, goes through a Dialer of c (see the package doc). It never
// uses a proxy. The caller bounds each request with its context; close
// the client's idle connections (CloseIdleConnections) when done with it.
func NewClient(c Config) (*http.Client, error) {
	d, err := NewDialer(c)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would connect elsewhere, unchecked
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		TLSClientConfig: &tls.Config{
			MinVersion:         tls.VersionTLS12,
			RootCAs:            c.RootCAs,
			InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // a named, logged setting of the caller's
		},
	}
	maxHops := orDefault(c.MaxRedirects, DefaultMaxRedirects)
	sensitive := append(append([]string(nil), alwaysSensitive...), c.SensitiveHeaders...)
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxHops < 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > maxHops {
				return &RefusedError{Rule: RuleRedirects, Host: req.URL.Host,
					Reason: fmt.Sprintf("stopped after %d redirects (the most this client follows is %d)", maxHops, maxHops)}
			}
			prev := via[len(via)-1]
			if prev.URL.Scheme == "https" && req.URL.Scheme != "https" {
				return &RefusedError{Rule: RuleDowngrade, Host: req.URL.Host,
					Reason: fmt.Sprintf("%s redirects from https to %s://%s: refused, the request would leave TLS", prev.URL.Host, req.URL.Scheme, req.URL.Host)}
			}
			if req.URL.Host != via[0].URL.Host {
				for _, h := range sensitive {
					req.Header.Del(h)
				}
			}
			return nil
		},
	}, nil
}
