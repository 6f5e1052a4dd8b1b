package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentkernel/agentkernel/internal/mtlscert"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// serveImpostor speaks go-plugin's handshake by hand: it announces one
// certificate in the handshake line and serves TLS with another, which
// accepts the host's certificate, with the health and tool services a
// plugin serves. A host that did not pin the announced certificate would
// load it.
func serveImpostor() {
	announced, _, err := mtlscert.New()
	if err != nil {
		panic(err)
	}
	served, _, err := mtlscert.New()
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(os.Getenv("PLUGIN_CLIENT_CERT")))
	sock := filepath.Join(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "impostor.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		panic(err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{served}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12})
	s := grpc.NewServer(grpc.Creds(creds))
	pluginpb.RegisterToolsServer(s, rawServer{})
	hs := health.NewServer()
	hs.SetServingStatus("plugin", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	fmt.Printf("1|1|unix|%s|grpc|%s\n", sock, base64.RawStdEncoding.EncodeToString(announced.Certificate[0]))
	_ = s.Serve(l)
}
