package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// serveRaw serves a hand-written tool service straight through go-plugin:
// it ignores the host's output cap and sends error codes the SDK would
// never send, to prove the host enforces its limits itself.
func serveRaw() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: sdk.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{
			sdk.ProtocolVersion: {sdk.PluginName: rawPlugin{}},
		},
		GRPCServer: plugin.DefaultGRPCServer,
	})
	os.Exit(0)
}

type rawPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (rawPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginpb.RegisterToolsServer(s, rawServer{})
	return nil
}

func (rawPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("not a host")
}

type rawServer struct {
	pluginpb.UnimplementedToolsServer
}

func (rawServer) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	return &pluginpb.DescribeResponse{Tools: []*pluginpb.ToolSpec{
		{Name: "flood", Description: "Returns that many bytes, whatever the cap.", Tier: "read_only",
			Schema: []byte(`{"type":"object","properties":{"bytes":{"type":"integer"}}}`)},
		{Name: "badcode", Description: "Fails with an invalid error code.", Tier: "read_only"},
	}}, nil
}

func (rawServer) Call(req *pluginpb.CallRequest, stream pluginpb.Tools_CallServer) error {
	var r *pluginpb.Result
	switch req.GetTool() {
	case "flood":
		var a floodArgs
		_ = json.Unmarshal(req.GetArgs(), &a)
		r = &pluginpb.Result{Content: strings.Repeat("y", a.Bytes)}
	default:
		r = &pluginpb.Result{IsError: true, Error: &pluginpb.Error{Code: "Not A Code!", Message: "bad"}}
	}
	return stream.Send(&pluginpb.CallEvent{Event: &pluginpb.CallEvent_Result{Result: r}})
}
