// Package mtlscert makes the certificates of the mutual TLS between the
// kernel and its subprocess plugins: go-plugin's "automatic mTLS"
// certificate (self-signed, for "localhost", usable by client and server)
// on ECDSA P-256 instead of go-plugin's P-521. The host's side
// (plugins/subprocess) and the Go SDK's side (sdk) both use it; the
// TypeScript and Python SDKs make the same certificate themselves.
//
// Why P-256: Go builds P-521's base-point table on the curve's first use
// in a process, which cost a fresh plugin 15-90 ms on the 2-core VM before
// it could answer the handshake (and verifying a P-521 signature needs the
// same table); P-256's table is compiled into the binary, and a key costs
// about 0.1 ms. RATIONALE.md, "Plugin cold start: where the time went".
package mtlscert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"
)

// New returns a fresh key and its self-signed certificate, as a
// tls.Certificate and in PEM (what PLUGIN_CLIENT_CERT carries). The fields
// are go-plugin's (its generateCert), only the curve differs.
func New() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"HashiCorp"}},
		DNSNames:              []string{"localhost"},
		NotBefore:             now.Add(-30 * time.Second),
		NotAfter:              now.Add(262980 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// KeyPEM returns cert's private key in PKCS#8 PEM, what
// PLUGIN_SERVER_KEY carries to a TypeScript or Python plugin.
func KeyPEM(cert tls.Certificate) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
