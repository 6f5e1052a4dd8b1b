// Package sdktest tests tool plugins, three ways:
//
//   - Start serves tools written with sdk in-process, through the
//     SDK's real gRPC service over an in-memory connection: fast,
//     debuggable, no binary needed.
//   - Build compiles the plugin's main package and Exec runs a plugin as a
//     real subprocess through the kernel's own host (pinned sha256,
//     sandbox, go-plugin handshake with AutoMTLS, no inherited
//     environment), exactly as `kernel run` would. Exec takes any plugin
//     configuration: a Go binary, or an interpreter and a script written
//     with sdk/typescript or sdk/python.
//   - Conformance runs the kernel's conformance suite against a plugin of
//     any language.
//
// Start and Exec return a *Plugin whose Call takes the tool's own name
// (without the "plugin." prefix the kernel adds).
package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// Plugin is a plugin under test. Safe for concurrent use.
type Plugin struct {
	prefix string // "name." for a subprocess, "" in-process
	tools  map[string]kernel.Tool
	specs  []kernel.ToolSpec
	// reg holds the tools as the kernel registers them: their schemas
	// compiled, so Call validates arguments exactly as the kernel does
	// before a call reaches the plugin.
	reg *kernel.Registry
}

// register compiles every tool's schema as the kernel does when it loads
// the plugin; a schema the kernel would refuse fails the test.
func (p *Plugin) register(tb testing.TB) {
	tb.Helper()
	p.reg = kernel.NewRegistry()
	for _, t := range p.tools {
		if err := p.reg.Register(t); err != nil {
			tb.Fatalf("sdktest: the kernel would refuse this plugin: %v", err)
		}
	}
}

// Specs returns the tools' specs as the kernel would see them (in-process:
// without the namespace, Source "sdk").
func (p *Plugin) Specs() []kernel.ToolSpec { return slices.Clone(p.specs) }

// Tool returns the tool with the given name (without the plugin prefix),
// or nil.
func (p *Plugin) Tool(name string) kernel.Tool { return p.tools[name] }

// Call calls a tool by its own name with JSON arguments, after validating
// them against the tool's schema as the kernel does: invalid arguments are
// a *kernel.ToolError with code invalid_args that matches both
// kernel.ErrInvalidArgs and sdk.ErrInvalidArgs under errors.Is, and the
// plugin never sees the call. Unknown names are an error wrapping
// kernel.ErrUnknownTool.
func (p *Plugin) Call(ctx context.Context, tool, args string) (kernel.Result, error) {
	t, ok := p.tools[tool]
	if !ok {
		return kernel.Result{}, fmt.Errorf("%w %q", kernel.ErrUnknownTool, tool)
	}
	name := t.Spec().Name
	if _, err := p.reg.Validate(name, json.RawMessage(args)); err != nil {
		return kernel.Result{}, &kernel.ToolError{Tool: name, Code: sdk.CodeInvalidArgs,
			Err: &sdk.Error{Code: sdk.CodeInvalidArgs, Message: err.Error(), Err: err}}
	}
	return t.Call(ctx, json.RawMessage(args))
}

// CallProgress is Call that also returns the progress reports, in order.
func (p *Plugin) CallProgress(ctx context.Context, tool, args string) (kernel.Result, []string, error) {
	var mu sync.Mutex
	var progress []string
	ctx = kernel.WithProgress(ctx, func(text string) {
		mu.Lock()
		progress = append(progress, text)
		mu.Unlock()
	})
	res, err := p.Call(ctx, tool, args)
	mu.Lock()
	defer mu.Unlock()
	return res, slices.Clone(progress), err
}

// Start serves tools in-process through the SDK's gRPC service and returns
// a client for them. Everything stops when the test ends. A bad tool spec
// fails the test.
func Start(tb testing.TB, tools ...*sdk.Tool) *Plugin {
	tb.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	if err := sdk.Register(srv, tools...); err != nil {
		tb.Fatalf("sdktest: %v", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///sdktest",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatalf("sdktest: dial: %v", err)
	}
	tb.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	rpc := pluginpb.NewToolsClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := rpc.Describe(ctx, &pluginpb.DescribeRequest{})
	if err != nil {
		tb.Fatalf("sdktest: describe: %v", err)
	}
	p := &Plugin{tools: map[string]kernel.Tool{}}
	for _, s := range desc.GetTools() {
		spec := kernel.ToolSpec{
			Name: s.GetName(), Description: s.GetDescription(), Schema: s.GetSchema(),
			Tier: kernel.Tier(s.GetTier()), Tags: s.GetTags(),
			Timeout: time.Duration(s.GetTimeoutMs()) * time.Millisecond, Source: "sdk",
		}
		p.specs = append(p.specs, spec)
		p.tools[spec.Name] = &remoteTool{rpc: rpc, spec: spec}
	}
	p.register(tb)
	return p
}

// remoteTool calls a tool over the in-process connection. Errors become
// *kernel.ToolError values wrapping *sdk.Error, as the real host makes
// them.
type remoteTool struct {
	rpc  pluginpb.ToolsClient
	spec kernel.ToolSpec
}

func (t *remoteTool) Spec() kernel.ToolSpec { return t.spec }

func (t *remoteTool) Call(ctx context.Context, args json.RawMessage) (kernel.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := t.rpc.Call(ctx, &pluginpb.CallRequest{Tool: t.spec.Name, Args: args})
	if err != nil {
		return kernel.Result{}, &kernel.ToolError{Tool: t.spec.Name, Code: sdk.CodeToolError, Err: err}
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errors.New("stream ended without a result")
			}
			return kernel.Result{}, &kernel.ToolError{Tool: t.spec.Name, Code: sdk.CodeToolError, Err: err}
		}
		if p := ev.GetProgress(); p != nil {
			kernel.ReportProgress(ctx, p.GetText())
			continue
		}
		r := ev.GetResult()
		res := kernel.Result{Content: r.GetContent(), IsError: r.GetIsError()}
		if e := r.GetError(); e != nil {
			return res, &kernel.ToolError{Tool: t.spec.Name, Code: e.GetCode(), Err: &sdk.Error{Code: e.GetCode(), Message: e.GetMessage()}}
		}
		return res, nil
	}
}

// Build compiles the main package pkg (a directory such as "." or an import
// path) with `go build -trimpath -ldflags="-s -w"` into tb.TempDir() and returns the
// binary's path and sha256. It needs the go command that runs the test.
func Build(tb testing.TB, pkg string) (path, sum string) {
	tb.Helper()
	path = filepath.Join(tb.TempDir(), "plugin")
	if err := BuildTo(path, pkg); err != nil {
		tb.Fatalf("sdktest: %v", err)
	}
	sum, err := FileSHA256(path)
	if err != nil {
		tb.Fatalf("sdktest: %v", err)
	}
	return path, sum
}

// BuildTo is Build for callers without a testing.TB, such as TestMain: it
// builds pkg into the file out, with flags (such as "-tags=…") added to
// Build's. A pkg that is a directory is built from inside it, so it may be
// a module of its own.
func BuildTo(out, pkg string, flags ...string) error {
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		goCmd = "go"
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	dir := ""
	if fi, err := os.Stat(pkg); err == nil && fi.IsDir() {
		dir, pkg = pkg, "."
	}
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w"}, flags...)
	cmd := exec.Command(goCmd, append(args, "-o", out, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// FileSHA256 returns the hex sha256 of a file, as `sha256sum` prints it.
func FileSHA256(path string) (string, error) { return config.FileSHA256(path) }

// Exec loads the plugin described by cfg through a real subprocess.Host
// (cfg.SHA256 must pin cfg.Path; Build returns both) and starts it. The
// host logs to the test log and is closed when the test ends.
func Exec(tb testing.TB, cfg subprocess.PluginConfig) *Plugin {
	tb.Helper()
	host := subprocess.NewHost(subprocess.HostConfig{
		Logger: hclog.New(&hclog.LoggerOptions{Name: "sdktest", Output: tbWriter{tb}, Level: hclog.Warn}),
	})
	tb.Cleanup(func() {
		if err := host.Close(); err != nil {
			tb.Errorf("sdktest: close host: %v", err)
		}
	})
	if cfg.Start == "" {
		cfg.Start = subprocess.StartEager
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := host.Load(ctx, cfg)
	if err != nil {
		tb.Fatalf("sdktest: %v", err)
	}
	p := &Plugin{prefix: cfg.Name + ".", tools: map[string]kernel.Tool{}}
	for _, t := range tools {
		s := t.Spec()
		p.specs = append(p.specs, s)
		p.tools[strings.TrimPrefix(s.Name, p.prefix)] = t
	}
	p.register(tb)
	return p
}

// tbWriter sends log lines to the test log.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
