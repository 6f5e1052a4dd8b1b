package subprocess

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// healthPoll is how often checkHealth asks again while the plugin says it
// is not serving yet.
const healthPoll = 50 * time.Millisecond

// checkHealth asks the plugin's gRPC health service (grpc.health.v1.Health,
// service "plugin": what go-plugin's own server registers, and what the
// SDKs serve) until it answers SERVING or ctx ends. It is the first call
// on the plugin's socket, so it is also where a plugin that printed the
// handshake line but does not serve there, or not with the certificate it
// announced, is caught, with an error that says so.
func checkHealth(ctx context.Context, cfg PluginConfig, proto plugin.ClientProtocol) error {
	gc, ok := proto.(*plugin.GRPCClient)
	if !ok {
		return nil
	}
	hc := healthpb.NewHealthClient(gc.Conn)
	last := ""
	for {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: plugin.GRPCServiceName})
		switch {
		case err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING:
			return nil
		case err == nil:
			last = resp.GetStatus().String()
		case status.Code(err) == codes.Unimplemented:
			return fmt.Errorf("it does not serve gRPC's health service (grpc.health.v1.Health), which go-plugin's protocol requires; %s", sdkOf(cfg).hint)
		case ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded:
			if last != "" {
				return fmt.Errorf("not healthy within %s: its health service (grpc.health.v1.Health, service %q) kept answering %s", StartTimeout, plugin.GRPCServiceName, last)
			}
			return fmt.Errorf("not healthy within %s: it printed the go-plugin handshake but did not answer its health check on its socket", StartTimeout)
		default:
			return fmt.Errorf("it printed the go-plugin handshake but its health check failed: %s (a plugin must serve gRPC on the socket it announced, with the AutoMTLS certificate it announced; %s)",
				status.Convert(err).Message(), sdkOf(cfg).hint)
		}
		t := time.NewTimer(healthPoll)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// healthThenDescribe runs the health check (checkHealth) and asks the
// plugin for its tools, both at once on the new connection: Describe's
// round trip overlaps the health check's instead of following it. The
// health check's verdict still comes first: when it fails, its error is
// returned and Describe's answer is dropped (and its call cancelled), so
// a plugin that is not healthy is refused with the same error as when
// the calls ran one after the other.
func healthThenDescribe(ctx context.Context, cfg PluginConfig, proto plugin.ClientProtocol, rpc pluginpb.ToolsClient) (*pluginpb.DescribeResponse, error) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type described struct {
		resp *pluginpb.DescribeResponse
		err  error
	}
	ch := make(chan described, 1)
	go func() {
		resp, err := rpc.Describe(dctx, &pluginpb.DescribeRequest{})
		ch <- described{resp, err}
	}()
	if err := checkHealth(ctx, cfg, proto); err != nil {
		cancel()
		<-ch
		return nil, err
	}
	d := <-ch
	if d.err != nil {
		return nil, fmt.Errorf("describe its tools: %w", d.err)
	}
	return d.resp, nil
}

// sdkInfo is how errors name a plugin's SDK and what to do, by the kind of
// plugin cfg is.
type sdkInfo struct {
	name  string // the SDK's directory in the repository
	serve string // the call that takes the plugin's stdout over
	hint  string // the question a start error ends with
}

var sdks = map[string]sdkInfo{
	"":       {"sdk", "sdk.Serve", "is it an agentkernel plugin built with the Go SDK (sdk.Serve)?"},
	"node":   {"sdk/typescript", "serve() (@agentkernel/plugin-sdk)", "is it built with the TypeScript SDK (sdk/typescript, serve() from @agentkernel/plugin-sdk)?"},
	"python": {"sdk/python", "agentkernel_plugin.serve()", "is it built with the Python SDK (sdk/python, agentkernel_plugin.serve())?"},
}

// sdkOf is cfg's SDK, from the interpreter's file name: node, python, or
// a binary's (or another interpreter's) Go SDK.
func sdkOf(cfg PluginConfig) sdkInfo {
	kind := ""
	if cfg.Interpreter != nil {
		base := filepath.Base(cfg.Interpreter.Path)
		switch {
		case strings.HasPrefix(base, "node"):
			kind = "node"
		case strings.HasPrefix(base, "python"):
			kind = "python"
		}
	}
	return sdks[kind]
}
