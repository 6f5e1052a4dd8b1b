package sdk

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// maxArgsBytes caps a call's arguments as received by the plugin.
const maxArgsBytes = 16 << 20

// windowSize is the HTTP/2 flow-control window of the plugin's server.
const windowSize = 4 << 20

// Serve serves tools to the host that started this process and exits when
// the host is done with it. Call it first thing in main: it never returns.
//
// Before the handshake, Serve takes over the process's standard output:
// file descriptor 1 is pointed at standard error (so anything the tools,
// their libraries or their child processes print there ends up in the
// host's log under the plugin's name), and only go-plugin's handshake line
// reaches the host's pipe. Anything printed before Serve is called still
// breaks the handshake; the host then refuses the plugin with an error that
// quotes the stray output.
//
// Serve also exits, killing its process group, if the host that started it
// dies. A bad tool spec, a duplicate tool name or an empty tool list is
// reported on standard error and the process exits with status 1, as it
// does when the binary is run by hand rather than by a host.
func Serve(tools ...*Tool) {
	os.Exit(servePlugin(Plugin{Tools: tools}))
}

func servePlugin(p Plugin) int {
	svc, err := newService(p.Tools, len(p.Hooks) > 0 || p.Memory != nil)
	hooks, herr := newHookService(p.Hooks)
	if err = errors.Join(err, herr); err != nil {
		fmt.Fprintf(os.Stderr, "agentkernel plugin: %v\n", err)
		return 1
	}
	if os.Getenv(MagicCookieKey) != MagicCookieValue {
		fmt.Fprintf(os.Stderr, "This binary is an agentkernel tool plugin; it is started by the kernel, not by hand.\n"+
			"Pin it in kernel.yaml under tools.plugins (see docs/plugins.md) and run `kernel plugins verify`.\n")
		return 1
	}
	stderr := os.Stderr
	// The plugin's side of the host's mutual TLS (serverTLS): made here on
	// P-256 where the handshake line can carry its certificate, else left
	// to go-plugin (P-521).
	var tlsProvider func() (*tls.Config, error)
	cert := ""
	if clientPEM := os.Getenv("PLUGIN_CLIENT_CERT"); clientPEM != "" && fillsHandshakeCert {
		cfg, c, err := serverTLS(clientPEM)
		if err != nil {
			fmt.Fprintf(stderr, "agentkernel plugin: mutual TLS with the host: %v\n", err)
			return 1
		}
		tlsProvider = func() (*tls.Config, error) { return cfg, nil }
		cert = c
	}
	hs, err := takeOverStdout(stderr, cert)
	if err != nil {
		fmt.Fprintf(stderr, "agentkernel plugin: take over stdout: %v\n", err)
		return 1
	}
	os.Stdout = hs
	watchParent()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake(),
		TLSProvider:     tlsProvider,
		VersionedPlugins: map[int]plugin.PluginSet{
			ProtocolVersion: {PluginName: &grpcPlugin{svc: svc, hooks: hooks, memory: p.Memory}},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts,
				grpc.MaxRecvMsgSize(maxArgsBytes),
				// A local socket needs no flow control tuning: large windows
				// let big arguments through without window-update round trips.
				grpc.InitialWindowSize(windowSize),
				grpc.InitialConnWindowSize(windowSize),
			)...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{
			Output:     stderr,
			JSONFormat: true,
			Level:      hclog.Info,
		}),
	})
	return 0
}
