package subprocess

import (
	"crypto/tls"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/mtlscert"
)

// clientTLS is the host's side of the mutual TLS with one plugin process,
// what go-plugin's AutoMTLS did on every start, but with one key per Host
// made on first use (P-256: internal/mtlscert) instead of a P-521 key per
// process start (1-8 ms of every start here). The process gets the
// certificate in PLUGIN_CLIENT_CERT and accepts no other client; it
// answers with a certificate of its own in the handshake line, which
// go-plugin writes into the returned config (RootCAs): the host talks to
// that process and no other. The private key never leaves the kernel's
// memory, so sharing it between processes gives none of them anything:
// each already knew the certificate, and none can sign with it.
func (h *Host) clientTLS() (*tls.Config, string, error) {
	h.tlsOnce.Do(func() {
		var pem []byte
		h.tlsCert, pem, h.tlsErr = mtlscert.New()
		h.tlsPEM = string(pem)
	})
	if h.tlsErr != nil {
		return nil, "", fmt.Errorf("make the host's TLS certificate: %w", h.tlsErr)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{h.tlsCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
		ServerName:   "localhost",
	}, h.tlsPEM, nil
}

// serverTLS makes the key and certificate one plugin process may serve
// with, handed to it in PLUGIN_SERVER_KEY and PLUGIN_SERVER_CERT (PEM).
// An interpreted plugin then needs no key generation and no X.509 code
// of its own at start: for Python that is the `cryptography` package, a
// third of the SDK's start (RATIONALE.md, "Python and TypeScript plugin
// start: the kernel hands the plugin its key"). Nothing else changes: the process still announces
// the certificate it serves with in the handshake line and go-plugin
// pins that one, so a plugin that makes its own (the Go SDK, older
// SDKs) is accepted as before. The pair is fresh for every process, so
// one plugin's key is no use against another's connection; the SDKs
// remove it from their environment before any tool code runs, so the
// plugin's children do not inherit it.
func serverTLS() (certPEM, keyPEM string, err error) {
	cert, pemCert, err := mtlscert.New()
	if err != nil {
		return "", "", fmt.Errorf("make the plugin's TLS certificate: %w", err)
	}
	pemKey, err := mtlscert.KeyPEM(cert)
	if err != nil {
		return "", "", fmt.Errorf("make the plugin's TLS certificate: %w", err)
	}
	return string(pemCert), string(pemKey), nil
}
