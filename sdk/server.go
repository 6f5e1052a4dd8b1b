package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentkernel/agentkernel/sdk/pluginpb"
	"github.com/agentkernel/agentkernel/tool"
)

// maxErrorMessage caps an error message sent to the host when the call has
// no output cap of its own.
const maxErrorMessage = 64 << 10

// service implements pluginpb.ToolsServer over a set of tools.
type service struct {
	pluginpb.UnimplementedToolsServer
	byName map[string]*Tool
	order  []*Tool
	trace  tracing
}

// newService checks tools; hooks says the plugin serves hooks too, so it
// may have no tools.
func newService(tools []*Tool, hooks bool) (*service, error) {
	s := &service{byName: map[string]*Tool{}}
	var errs []error
	for _, t := range tools {
		if t == nil {
			errs = append(errs, errors.New("nil tool"))
			continue
		}
		if t.err != nil {
			errs = append(errs, t.err)
			continue
		}
		if _, dup := s.byName[t.spec.Name]; dup {
			errs = append(errs, fmt.Errorf("tool %s: defined twice", t.spec.Name))
			continue
		}
		s.byName[t.spec.Name] = t
		s.order = append(s.order, t)
	}
	if len(tools) == 0 && !hooks {
		errs = append(errs, errors.New("no tools to serve"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Register adds the tool service for tools to s. Serve uses it; use it
// directly only to serve tools over a transport of your own, as sdktest
// does. The error lists every bad tool.
func Register(s grpc.ServiceRegistrar, tools ...*Tool) error {
	svc, err := newService(tools, false)
	if err != nil {
		return err
	}
	pluginpb.RegisterToolsServer(s, svc)
	return nil
}

func (s *service) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	out := &pluginpb.DescribeResponse{SdkVersion: Version}
	for _, t := range s.order {
		out.Tools = append(out.Tools, &pluginpb.ToolSpec{
			Name:        t.spec.Name,
			Description: t.spec.Description,
			Schema:      []byte(t.spec.Schema),
			Tier:        string(t.spec.Tier),
			Tags:        t.spec.Tags,
			TimeoutMs:   t.spec.Timeout.Milliseconds(),

			ChecksSideEffects: t.spec.CheckSideEffect != nil,
		})
	}
	return out, nil
}

func (s *service) Call(req *pluginpb.CallRequest, stream pluginpb.Tools_CallServer) error {
	t, ok := s.byName[req.GetTool()]
	if !ok {
		return stream.Send(resultEvent(&pluginpb.Result{
			IsError: true,
			Error:   &pluginpb.Error{Code: CodeUnknownTool, Message: fmt.Sprintf("unknown tool %q", req.GetTool())},
		}))
	}
	// Progress reports go out on the stream until the handler returns.
	// grpc streams are not safe for concurrent Send, hence the lock.
	var mu sync.Mutex
	done := false
	ctx, cancel := withKernelDeadline(stream.Context())
	defer cancel()
	ctx = tool.WithProgress(ctx, func(text string) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		_ = stream.Send(&pluginpb.CallEvent{Event: &pluginpb.CallEvent_Progress{Progress: &pluginpb.Progress{Text: text}}})
	})
	ctx, span := s.trace.start(ctx, t.spec.Name)
	res, err := t.Call(ctx, req.GetArgs())
	mu.Lock()
	done = true
	mu.Unlock()

	max := int(req.GetMaxOutputBytes())
	out := &pluginpb.Result{Content: res.Content, IsError: res.IsError || err != nil}
	out.Spans = s.trace.finish(span, out.IsError)
	if max > 0 && len(out.Content) > max {
		out.TruncatedFrom = int64(len(out.Content))
		out.Content = TruncateOutput(out.Content, max)
	}
	if err != nil {
		msgMax := max
		if msgMax <= 0 {
			msgMax = maxErrorMessage
		}
		out.Error = &pluginpb.Error{Code: CodeOf(err), Message: TruncateOutput(err.Error(), msgMax)}
	}
	return stream.Send(resultEvent(out))
}

// CheckSideEffect answers for an interrupted call of one of the tools.
func (s *service) CheckSideEffect(ctx context.Context, req *pluginpb.CheckSideEffectRequest) (*pluginpb.CheckSideEffectResponse, error) {
	t, ok := s.byName[req.GetTool()]
	if !ok {
		return &pluginpb.CheckSideEffectResponse{Detail: fmt.Sprintf("unknown tool %q", req.GetTool())}, nil
	}
	e, detail := t.CheckSideEffect(ctx, req.GetArgs(), time.Unix(0, req.GetSinceUnixNano()))
	out := &pluginpb.CheckSideEffectResponse{Detail: TruncateOutput(detail, maxSideEffectDetail)}
	switch e {
	case SideEffectCompleted:
		out.Effect = pluginpb.SideEffect_SIDE_EFFECT_COMPLETED
	case SideEffectNotRun:
		out.Effect = pluginpb.SideEffect_SIDE_EFFECT_NOT_RUN
	}
	return out, nil
}

// maxSideEffectDetail caps a CheckSideEffect's detail (the host cuts it
// again).
const maxSideEffectDetail = 1 << 10

func resultEvent(r *pluginpb.Result) *pluginpb.CallEvent {
	return &pluginpb.CallEvent{Event: &pluginpb.CallEvent_Result{Result: r}}
}

// grpcPlugin is the plugin side of go-plugin's plugin interface.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	svc    *service
	hooks  *hookService
	memory MemoryProvider
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginpb.RegisterToolsServer(s, p.svc)
	if len(p.hooks.order) > 0 {
		pluginpb.RegisterHooksServer(s, p.hooks)
	}
	if p.memory != nil {
		pluginpb.RegisterMemoryServer(s, &memoryService{p: p.memory})
	}
	return nil
}

func (p *grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("the SDK serves tools; it is not a host")
}
