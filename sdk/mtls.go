package sdk

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"math/big"
	"time"
)

// serverTLS is the plugin's side of go-plugin's automatic mutual TLS, made
// by the SDK instead of by go-plugin: the same configuration (a fresh
// self-signed certificate for "localhost", the host's certificate from
// PLUGIN_CLIENT_CERT as the only accepted client, client certificates
// required and verified, TLS 1.2 at least), on ECDSA P-256 where go-plugin
// uses P-521. Go computes P-521's base-point table on its first use in a
// process, so go-plugin's key cost every Go plugin 15-90 ms of its start
// on the 2-core VM (about 1 ms once warm); a P-256 key costs 0.1 ms, its
// table is built into the binary. The TypeScript and Python SDKs have
// always answered with P-256. The certificate reaches the host in the
// handshake line's sixth field, as go-plugin's does (forwardStdout fills
// it in): the host's go-plugin client pins it exactly as before.
// RATIONALE.md, "Plugin cold start: where the time went".
//
// certB64 is the certificate's DER in unpadded base64, as go-plugin writes
// it into the handshake line.
func serverTLS(clientPEM string) (cfg *tls.Config, certB64 string, err error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(clientPEM)) {
		return nil, "", errors.New("PLUGIN_CLIENT_CERT holds no PEM certificate")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, "", err
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
		return nil, "", err
	}
	cfg = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		RootCAs:      pool,
		ServerName:   "localhost",
	}
	return cfg, base64.RawStdEncoding.EncodeToString(der), nil
}
