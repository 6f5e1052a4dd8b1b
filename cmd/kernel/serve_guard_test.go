package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"io"
	"math/big"
	"slices"
	"testing"
	"time"
)

// TestServeAllowedHosts: the names kernel serve answers to are its
// --allow-host names, a --listen host name and its TLS certificate's DNS
// names (not a wildcard: a rebinding page could pick any name under it).
func TestServeAllowedHosts(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kernel"},
		DNSNames: []string{"kernel.corp.example", "*.corp.example"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	var g serveGuardFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	if err := fs.Parse([]string{"--allow-host", "public.example"}); err != nil {
		t.Fatal(err)
	}
	got := g.allowedHosts("myhost:8443", &tls.Certificate{Certificate: [][]byte{der}})
	for _, want := range []string{"public.example", "myhost", "kernel.corp.example"} {
		if !slices.Contains(got, want) {
			t.Errorf("%v lacks %s", got, want)
		}
	}
	if slices.Contains(got, "*.corp.example") {
		t.Errorf("%v accepts a wildcard", got)
	}
	if got := g.allowedHosts("127.0.0.1:8080", nil); len(got) != 1 {
		t.Errorf("an IP --listen adds a name: %v", got)
	}
}
