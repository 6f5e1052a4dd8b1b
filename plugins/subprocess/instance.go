package subprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"

	"github.com/agentkernel/agentkernel/sandbox/proc"
	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// windowSize is the HTTP/2 flow-control window of the host's connection.
const windowSize = 4 << 20

// stopGrace is how long a graceful stop may take before the process group
// is killed.
const stopGrace = 2 * time.Second

// instance is one running plugin process.
type instance struct {
	client     *plugin.Client
	runner     *groupRunner
	rpc        pluginpb.ToolsClient
	hooks      pluginpb.HooksClient
	memory     pluginpb.MemoryClient
	specs      []toolSpec // as described by this process
	byName     map[string]toolSpec
	sdkVersion string
	started    time.Time

	cleanup sync.Once     // go-plugin's Kill: close connections, wait its goroutines, remove the socket dir
	exited  chan struct{} // closed by watch once the process is gone and cleaned up

	mu         sync.Mutex
	stopReason string // why the host stopped it; empty means it died on its own
	crash      string // the crash text, when it died on its own; set before exited closes
}

// startInstance execs the verified copy exe of the plugin cfg, completes
// go-plugin's handshake (AutoMTLS's protocol with the host's key: clientTLS;
// gRPC only; StartTimeout) and asks for
// its tools. The process runs with an environment made of cfg.Env's
// variables and go-plugin's handshake variables, nothing else.
func startInstance(ctx context.Context, h *Host, cfg PluginConfig, exe string) (*instance, error) {
	var gr *groupRunner
	recvMax := cfg.MaxOutputBytes + 1<<20 // room for the marker, the error text and framing
	plog := h.log.Named(cfg.Name)
	tlsConfig, hostCert, err := h.clientTLS()
	if err != nil {
		return nil, &StartError{Plugin: cfg.Name, Reason: err.Error(), Err: err}
	}
	var serverCert, serverKey string
	if cfg.Interpreter != nil {
		// Only the interpreted SDKs use it (serverTLS); a Go plugin makes
		// its own key faster than it would parse this one.
		if serverCert, serverKey, err = serverTLS(); err != nil {
			return nil, &StartError{Plugin: cfg.Name, Reason: err.Error(), Err: err}
		}
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: sdk.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{
			sdk.ProtocolVersion: {sdk.PluginName: hostPlugin{}},
		},
		RunnerFunc: func(_ hclog.Logger, c *exec.Cmd, _ string) (runner.Runner, error) {
			// c carries go-plugin's handshake environment, including the
			// private socket directory it created under h.dir.
			grant := PluginGrant(cfg, exe, envValue(c.Env, plugin.EnvUnixSocketDir))
			grant.AllowMissing = append(grant.AllowMissing, h.cfg.AllowMissing...)
			extra := append(c.Env[:len(c.Env):len(c.Env)], "PLUGIN_CLIENT_CERT="+hostCert)
			if serverKey != "" {
				extra = append(extra, "PLUGIN_SERVER_CERT="+serverCert, "PLUGIN_SERVER_KEY="+serverKey)
			}
			gr = newGroupRunner(cfg.Name, proc.Spec{Argv: commandLine(cfg, exe), Dir: cfg.Dir,
				Grant: grant, Env: cfg.Env, Extra: extra, Spawner: h.spawner})
			return gr, nil
		},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// go-plugin's AutoMTLS, with the host's key made once (clientTLS):
		// go-plugin loads the certificate the process answers with into
		// tlsConfig, a config of this process's own.
		TLSConfig:        tlsConfig,
		SkipHostEnv:      true,
		StartTimeout:     StartTimeout,
		Logger:           h.log,
		SyncStdout:       newLineLogger(plog, "stdout"),
		SyncStderr:       newLineLogger(plog, "stderr"),
		UnixSocketConfig: &plugin.UnixSocketConfig{TempDir: h.dir},
		GRPCDialOptions: []grpc.DialOption{
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(recvMax)),
			// Large windows: a local socket needs no flow control tuning,
			// and big results then need no window-update round trips.
			grpc.WithInitialWindowSize(windowSize),
			grpc.WithInitialConnWindowSize(windowSize),
		},
	})
	inst := &instance{client: client, exited: make(chan struct{}), started: time.Now()}
	fail := func(reason string, err error) (*instance, error) {
		// A process that ended on its own says how (a launcher that
		// could not exec the copy reports why; the plugin wrote nothing).
		ended := gr != nil && gr.exited()
		if gr != nil {
			gr.Kill(context.Background())
		}
		inst.cleanup.Do(client.Kill)
		stderr := ""
		if gr != nil {
			stderr = gr.stderrTail()
		}
		if ended {
			reason += " (" + gr.exit().String() + ")"
		}
		return nil, &StartError{Plugin: cfg.Name, Reason: reason, Stderr: lastLines(stderr, 12), Err: err}
	}
	proto, err := client.Client()
	if err != nil {
		return fail(describeStartError(cfg, err), err)
	}
	inst.runner = gr
	raw, err := proto.Dispense(sdk.PluginName)
	if err != nil {
		return fail("dispense the tool service: "+err.Error(), err)
	}
	cl := raw.(clients)
	inst.rpc, inst.hooks, inst.memory = cl.tools, cl.hooks, cl.memory
	dctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	desc, err := healthThenDescribe(dctx, cfg, proto, inst.rpc)
	if err != nil {
		return fail(err.Error(), err)
	}
	var specs []toolSpec
	// A memory provider may serve no tools (docs/memory.md).
	if len(desc.GetTools()) > 0 || !servesMemory(dctx, inst.memory) {
		if specs, err = convertSpecs(cfg.Name, desc.GetTools()); err != nil {
			return fail(err.Error(), err)
		}
	}
	inst.specs = specs
	inst.byName = make(map[string]toolSpec, len(specs))
	for _, sp := range specs {
		inst.byName[sp.Name] = sp
	}
	inst.sdkVersion = desc.GetSdkVersion()
	return inst, nil
}

// describeStartError turns go-plugin's start errors into ones that say
// what happened and what to do.
func describeStartError(cfg PluginConfig, err error) string {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "Unrecognized remote plugin message: "):
		line, _, _ := strings.Cut(strings.TrimPrefix(msg, "Unrecognized remote plugin message: "), "\n")
		if line == "" {
			return "it closed its stdout without the go-plugin handshake; " + sdkOf(cfg).hint
		}
		if len(line) > 200 {
			line = line[:200] + "..."
		}
		return fmt.Sprintf("it printed %q to stdout before the go-plugin handshake; a plugin must write nothing to stdout before %s takes it over (log to stderr)", line, sdkOf(cfg).serve)
	case strings.Contains(msg, "exited before we could connect"):
		return "it exited before the go-plugin handshake"
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return fmt.Sprintf("no go-plugin handshake within %s", StartTimeout)
	case strings.Contains(msg, "incompatible API version"):
		return fmt.Sprintf("protocol version mismatch (%s); this kernel speaks tool protocol %d: rebuild the plugin against a compatible agentkernel SDK (%s)", msg, sdk.ProtocolVersion, sdkOf(cfg).name)
	case strings.Contains(msg, "incompatible core API version"), strings.Contains(msg, "unsupported plugin protocol"),
		strings.Contains(msg, "error parsing"), strings.Contains(msg, "unknown address type"):
		return msg + "; " + sdkOf(cfg).hint
	case errors.Is(err, os.ErrPermission):
		return msg + " (is the host's run directory on a noexec file system?)"
	}
	return msg
}

// status returns why the process is gone: the host's reason
// for stopping it, or its crash text.
func (i *instance) status() (stopReason, crash string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.stopReason, i.crash
}

// kill records why the host is stopping the process and kills its group
// at once.
func (i *instance) kill(reason string) {
	i.markStopped(reason)
	i.runner.Kill(context.Background())
}

func (i *instance) markStopped(reason string) {
	i.mu.Lock()
	if i.stopReason == "" {
		i.stopReason = reason
	}
	i.mu.Unlock()
}

// shutdown asks the plugin to exit (go-plugin's graceful shutdown), kills
// its group if it has not within stopGrace, and waits until it is gone.
func (i *instance) shutdown(reason string) {
	i.markStopped(reason)
	t := time.AfterFunc(stopGrace, func() { i.runner.Kill(context.Background()) })
	i.cleanup.Do(i.client.Kill)
	t.Stop()
	<-i.exited
}

// watch waits for the process to exit, lets go-plugin clean up, records the
// crash text if the host did not stop it, and tells the supervisor.
func (i *instance) watch(s *supervisor) {
	<-i.runner.done()
	i.cleanup.Do(i.client.Kill)
	i.mu.Lock()
	crashed := i.stopReason == ""
	exit := i.runner.exit() // waits for stderr to drain
	if crashed {
		tail := i.runner.tail.String()
		report := i.runner.tail.Crash()
		i.crash = crashText(tail, report)
		// The crash text leads with the limit that stopped the plugin, or
		// why the sandbox could not start it.
		if o := exit.Outcome.ExplainGoOutOfMemory(i.runner.spec.Grant, report); o.Known && (o.Limit != nil || o.Err != "") {
			i.crash = strings.TrimRight(o.String()+"\n"+i.crash, "\n")
		}
	}
	crash := i.crash
	i.mu.Unlock()
	if crashed {
		s.log.Error("plugin process died", "pid", i.runner.pid, "exit", fmt.Sprint(exit.Err), "crash", crash)
	} else {
		s.log.Debug("plugin process stopped", "pid", i.runner.pid, "reason", i.stopReason)
	}
	// The supervisor forgets this process (and counts the crash) before
	// callers waiting on exited go on, so that their next call starts a
	// new one after the right backoff.
	s.exited(i, crashed)
	close(i.exited)
}

// waitExited waits up to d for the process to be gone.
func (i *instance) waitExited(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-i.exited:
		return true
	case <-t.C:
		return false
	}
}

// hostPlugin is the host side of go-plugin's plugin interface.
type hostPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

func (hostPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("the host does not serve tools")
}

func (hostPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return clients{tools: pluginpb.NewToolsClient(c), hooks: pluginpb.NewHooksClient(c), memory: pluginpb.NewMemoryClient(c)}, nil
}

// clients are the services of a plugin's connection: its tools, and its
// hooks when it serves any.
type clients struct {
	tools  pluginpb.ToolsClient
	hooks  pluginpb.HooksClient
	memory pluginpb.MemoryClient
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
