//go:build unix

package sdk_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/sdk"
)

// selfSigned makes a P-256 certificate for "localhost", as a host's.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestServerMutualTLS starts a Go SDK plugin (this test binary, serving)
// as the host does, with the host's certificate in PLUGIN_CLIENT_CERT, and
// holds what the SDK's own mutual TLS (sdk/mtls.go) must keep of
// go-plugin's: the handshake line carries the plugin's certificate (P-256,
// for "localhost"), a client presenting the host's certificate gets in,
// and a client presenting another certificate, or none, is refused by the
// plugin. Making the server stop requiring or checking client
// certificates fails the last two.
func TestServerMutualTLS(t *testing.T) {
	hostCert, hostPEM := selfSigned(t)
	otherCert, _ := selfSigned(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{"SDK_TEST_SERVE=1", sdk.MagicCookieKey + "=" + sdk.MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS=1", "PLUGIN_UNIX_SOCKET_DIR=" + dir, "PLUGIN_CLIENT_CERT=" + string(hostPEM)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("handshake line: %v", err)
	}
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) < 6 || parts[2] != "unix" {
		t.Fatalf("handshake line %q", line)
	}
	der, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil {
		t.Fatalf("handshake line's certificate: %v", err)
	}
	serverCert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("handshake line's certificate: %v", err)
	}
	if pub, ok := serverCert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("plugin's key is %T, want ECDSA P-256", serverCert.PublicKey)
	}
	roots := x509.NewCertPool()
	roots.AddCert(serverCert)

	dial := func(certs []tls.Certificate) error {
		raw, err := net.Dial("unix", parts[3])
		if err != nil {
			return err
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
		c := tls.Client(raw, &tls.Config{Certificates: certs, RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
		if err := c.Handshake(); err != nil {
			return err
		}
		// TLS 1.3: the server's verdict on the client's certificate
		// arrives after the client's handshake returns; a read sees it.
		_, err = c.Read(make([]byte, 1))
		return err
	}
	if err := dial([]tls.Certificate{hostCert}); err != nil {
		t.Fatalf("the host's certificate: %v", err)
	}
	for name, certs := range map[string][]tls.Certificate{"another certificate": {otherCert}, "no certificate": nil} {
		err := dial(certs)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: got in (err %v), want a certificate error", name, err)
		}
	}
}
