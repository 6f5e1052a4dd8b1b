package sdk

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"

	"github.com/agentkernel/agentkernel/internal/mtlscert"
)

// serverTLS is the plugin's side of go-plugin's automatic mutual TLS, made
// by the SDK instead of by go-plugin: the same configuration (a fresh
// self-signed certificate for "localhost", the host's certificate from
// PLUGIN_CLIENT_CERT as the only accepted client, client certificates
// required and verified, TLS 1.2 at least), on ECDSA P-256 where go-plugin
// uses P-521, which cost a fresh Go plugin 15-90 ms (internal/mtlscert).
// The TypeScript and Python SDKs have always answered with P-256. The
// certificate reaches the host in the handshake line's sixth field, as
// go-plugin's does (forwardStdout fills it in), and the host pins it
// exactly as before.
//
// certB64 is the certificate's DER in unpadded base64, as go-plugin writes
// it into the handshake line.
func serverTLS(clientPEM string) (cfg *tls.Config, certB64 string, err error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(clientPEM)) {
		return nil, "", errors.New("PLUGIN_CLIENT_CERT holds no PEM certificate")
	}
	cert, _, err := mtlscert.New()
	if err != nil {
		return nil, "", err
	}
	cfg = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		RootCAs:      pool,
		ServerName:   "localhost",
	}
	return cfg, base64.RawStdEncoding.EncodeToString(cert.Certificate[0]), nil
}
