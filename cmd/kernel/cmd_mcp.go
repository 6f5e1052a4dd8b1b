package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/mcp"
)

// mcpGroup is `kernel mcp`.
var mcpGroup = group{
	name:   "mcp",
	footer: "See docs/mcp.md.",
	subs: []subcmd{
		{name: "ls", synopsis: "[--json]", summary: "connect to the configured MCP servers (tools.mcp) and list each\none's state and the tools the kernel registered from it",
			flags: mcpLs},
		{name: "serve", synopsis: "[--http ADDR --token-env NAME] [--events FILE]", summary: `be an MCP server: offer the kernel's tools (built-ins, plugins,
WASM, proxied MCP tools) to an MCP client, every call through the
kernel's pipeline (schema, hooks, policy, scrubber, decision log);
each client connection is stored as a session. Speaks stdio, or
streamable HTTP on ADDR with --http (the client must send
"Authorization: Bearer <token>", the token read from the
environment variable --token-env, default KERNEL_MCP_TOKEN).`,
			flags: mcpServeCmd},
		{name: "import", synopsis: "FILE [--write CONFIG]", summary: `read an MCP client's server list (the mcpServers format of
Claude Desktop's claude_desktop_config.json, Claude Code's
.mcp.json, Cursor's mcp.json) and print tools.mcp entries for
it, with the grants each needs; --write adds them to CONFIG.
Tiers are left to you: every tool is side_effecting until its
entry's tiers names it.`,
			args: "FILE", need: 1, needs: "a FILE (a .mcp.json, claude_desktop_config.json or mcp.json)", flags: mcpImportCmd},
	},
}

func mcpLs(fs *flag.FlagSet) subRun {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
		return mcpList(ctx, cf, env, *asJSON)
	}
}

func mcpServeCmd(fs *flag.FlagSet) subRun {
	addr := fs.String("http", "", "streamable HTTP on `ADDR` (e.g. 127.0.0.1:8931) instead of stdio")
	tokenEnv := fs.String("token-env", "KERNEL_MCP_TOKEN", "with --http, the environment variable holding the bearer token clients must send")
	events := fs.String("events", "", "write every event as a JSON line to `FILE` (- for stderr)")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
		return mcpServe(ctx, cf, env, *addr, *tokenEnv, *events)
	}
}

func mcpImportCmd(fs *flag.FlagSet) subRun {
	write := fs.String("write", "", "add the entries to the tools.mcp of configuration `FILE` (its comments and layout kept) instead of printing them")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		if len(pos) != 1 {
			return usageError("mcp import takes one FILE (a .mcp.json, claude_desktop_config.json or mcp.json)")
		}
		return mcpImport(cf, env, pos[0], *write)
	}
}

// MCPServeConfig is the mcp_serve section of kernel.yaml.
type MCPServeConfig struct {
	// Approvals says who may answer a policy ask of a client's call (one
	// of the mcpApprovals values; empty means kernel).
	Approvals string `yaml:"approvals"`
}

// Who may answer an ask in `kernel mcp serve` (mcp_serve.approvals).
const (
	// approvalsKernel leaves it pending in the session for `kernel
	// approve`/`reject`: the client, which is the agent, never approves
	// its own calls. The default.
	approvalsKernel = "kernel"
	// approvalsElicitation asks the client's user by elicitation; a
	// client without elicitation gets the call rejected.
	approvalsElicitation = "elicitation"
	// approvalsBoth asks by elicitation when the client supports it, and
	// leaves it pending otherwise.
	approvalsBoth = "both"
)

// noModel is the provider of `kernel mcp serve`: the client is the agent.
type noModel struct{}

func (noModel) Stream(context.Context, kernel.Request, func(kernel.Delta)) (kernel.Response, error) {
	return kernel.Response{}, errors.New("kernel mcp serve has no model: its client is the agent")
}

func mcpServe(ctx context.Context, cf *commonFlags, env *cliEnv, addr, tokenEnv, events string) error {
	token := ""
	if addr != "" {
		token = os.Getenv(tokenEnv)
		heldSecrets.Add(token)
		if token == "" {
			return exitError{code: 2, msg: fmt.Sprintf("mcp serve --http needs a bearer token in the environment variable %s (--token-env)", tokenEnv)}
		}
	}
	ev, closeEv, err := eventsWriter(events, env.stderr)
	if err != nil {
		return err
	}
	defer closeEv()
	// stdout may be the protocol: nothing else is written to it.
	r := newRenderer(&cliEnv{stdin: env.stdin, stdout: env.stderr, stderr: env.stderr}, true, ev)
	a, err := loadApp(ctx, cf, env, true)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.openStore(false); err != nil {
		return err
	}
	k, err := a.kernel(noModel{}, r.event)
	if err != nil {
		return err
	}
	for _, n := range a.warnings {
		r.event(n)
	}
	if err := a.serveMetrics(ctx, env.stderr); err != nil {
		return err
	}
	srv := newMCPServer(k, a.log, a.cfg.MCPServe.Approvals, a.tel != nil && a.tel.TracesOn())
	if addr == "" {
		t := &sdk.IOTransport{Reader: io.NopCloser(env.stdin), Writer: nopWriteCloser{env.stdout}}
		err := srv.Run(ctx, t)
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	return serveMCPHTTP(ctx, srv, addr, token, env.stderr)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpIdleTimeout ends an HTTP client session nobody used for this long.
const mcpIdleTimeout = 30 * time.Minute

// serveMCPHTTP serves streamable HTTP until ctx ends. Every request must
// carry the bearer token.
func serveMCPHTTP(ctx context.Context, srv *sdk.Server, addr, token string, stderr io.Writer) error {
	// A client that goes away without ending its session (no DELETE)
	// leaves it idle: the SDK closes it after mcpIdleTimeout.
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{SessionTimeout: mcpIdleTimeout})
	want := "Bearer " + token
	auth := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !constantTimeEqual(req.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentkernel"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, req)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp serve --http: %w", err)
	}
	fmt.Fprintf(stderr, "kernel: MCP server listening on http://%s/mcp\n", ln.Addr())
	hs := &http.Server{Handler: auth, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	err = hs.Serve(ln)
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// loadMCP connects to every configured MCP server and registers its tools
// as "<server>.<tool>". A tool left out (bad or huge schema) is a warning;
// a server that cannot be reached is an error. When a server's tool list
// changes, the registry follows (between generations).
func (a *app) loadMCP(ctx context.Context) error {
	scs, err := a.cfg.mcpConfigs()
	if err != nil || len(scs) == 0 {
		return err
	}
	tools := a.tools
	a.mcp = mcp.NewHost(mcp.HostConfig{
		AllowMissing: a.cfg.Sandbox.AllowMissing,
		Logger:       a.log.Named("mcp"),
		Workspace:    a.cfg.path(a.cfg.Workspace),
		CacheDir:     filepath.Join(cacheDir(), "mcp"),
		OnNotice:     func(n kernel.Notice) { a.emit(n) },
		OnToolsChanged: func(server string, ts []kernel.Tool, _ []mcp.Problem) {
			for _, err := range tools.Sync("mcp:"+server, ts) {
				a.log.Warn("mcp tool left out after list_changed", "server", server, "error", err)
			}
			for _, err := range a.syncAgents("mcp:"+server, ts) {
				a.log.Warn("mcp tool left out after list_changed", "server", server, "error", err)
			}
			a.emit(kernel.Notice{Source: "mcp:" + server, Level: "info", Text: fmt.Sprintf("mcp server %s changed its tools; %d registered", server, len(ts))})
		},
	})
	a.closers = append(a.closers, a.mcp.Close)
	for i, sc := range scs {
		ts, problems, err := a.mcp.Load(ctx, sc)
		if err != nil {
			return fmt.Errorf("%s: tools.mcp[%d] (%s): %w", a.cfg.mcpSource(), i, sc.Name, err)
		}
		for _, p := range problems {
			a.warnings = append(a.warnings, kernel.Notice{Source: "mcp:" + sc.Name, Level: "warn", Text: p.String()})
		}
		if err := a.tools.Register(ts...); err != nil {
			return fmt.Errorf("%s: tools.mcp[%d] (%s): %w", a.cfg.mcpSource(), i, sc.Name, err)
		}
	}
	return nil
}

// mcpHost is the state of `kernel mcp serve`: one direct session per client
// connection, opened at the connection's first call.
type mcpHost struct {
	k   *kernel.Kernel
	log hclog.Logger
	// approvals is mcp_serve.approvals: who may answer an ask.
	approvals string
	// traced: a client's trace context (_meta.traceparent) is continued.
	traced bool

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*kernel.DirectSession
}

// newMCPServer builds the MCP server that offers every tool of k's registry.
// The SDK does not validate arguments here (tools are added raw): the
// kernel's pipeline does, like for a model's calls.
func newMCPServer(k *kernel.Kernel, log hclog.Logger, approvals string, traced bool) *sdk.Server {
	if approvals == "" {
		approvals = approvalsKernel
	}
	h := &mcpHost{k: k, log: log.Named("mcp-serve"), approvals: approvals, traced: traced, sessions: map[*sdk.ServerSession]*kernel.DirectSession{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "agentkernel", Title: "agentkernel (policy-guarded tools)", Version: version}, &sdk.ServerOptions{
		Instructions: "Every call goes through the kernel's policy, hooks and credential scrubber. A denied call returns isError naming the policy rule.",
		// The handshake-era versions: approvals use elicitation/create,
		// which needs the client's initialize capabilities. The 2026-07-28
		// protocol's multi-round-trip input requests are not implemented;
		// its clients fall back to initialize.
		SupportedProtocolVersions: slices.DeleteFunc(sdk.SupportedProtocolVersions(), func(v string) bool { return v >= "2026-07-28" }),
	})
	for _, spec := range k.Tools().Specs() {
		destructive := spec.Tier == kernel.TierPrivileged
		srv.AddTool(&sdk.Tool{
			Name: spec.Name, Description: spec.Description, InputSchema: json.RawMessage(spec.Schema),
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: spec.Tier == kernel.TierReadOnly, DestructiveHint: &destructive},
		}, h.handler(spec.Name))
	}
	return srv
}

// session returns the direct session of a client connection, opening it at
// the first call.
func (h *mcpHost) session(ctx context.Context, ss *sdk.ServerSession) (*kernel.DirectSession, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d, ok := h.sessions[ss]; ok {
		return d, nil
	}
	client := "mcp-client"
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
		client = p.ClientInfo.Name
	}
	d, err := h.k.OpenDirect(ctx, client, "mcp serve: "+client, map[string]string{"mcp_session": ss.ID()})
	if err != nil {
		return nil, err
	}
	h.sessions[ss] = d
	h.log.Info("client session", "client", client, "session", d.ID())
	// Forget it when the connection ends (stdio EOF; over HTTP the
	// client's DELETE or the idle timeout), or the table grows with every
	// client a long-running server ever had.
	go func() {
		_ = ss.Wait()
		h.mu.Lock()
		delete(h.sessions, ss)
		open := len(h.sessions)
		h.mu.Unlock()
		h.log.Info("client session ended", "client", client, "session", d.ID(), "open", open)
	}()
	return d, nil
}

func (h *mcpHost) handler(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		d, err := h.session(ctx, req.Session)
		if err != nil {
			return nil, err
		}
		if h.traced && req.Params.Meta != nil { // the client's trace context (SEP-414): the call's span continues it
			ctx = propagation.TraceContext{}.Extract(ctx, mcp.MetaCarrier(req.Params.Meta))
		}
		res, err := d.Call(ctx, name, req.Params.Arguments, h.approver(req.Session))
		if err != nil {
			return nil, err
		}
		text := res.Result.Content
		if res.Outcome == kernel.OutcomeDenied && res.Decision != nil && len(res.Decision.Rules) > 0 {
			text += " [policy rule: " + strings.Join(res.Decision.Rules, ", ") + "]"
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, IsError: res.Result.IsError}, nil
	}
}

// approver is who answers a policy ask of the client's calls, as
// mcp_serve.approvals says: nil (the ask is left pending in the session
// for `kernel approve`) under "kernel", and under "both" for a client
// without elicitation; the client's user through elicitation under
// "elicitation" and "both" when the client supports it; a refusal under
// "elicitation" for a client that does not.
func (h *mcpHost) approver(ss *sdk.ServerSession) kernel.Approver {
	if h.approvals == approvalsKernel {
		return nil
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		if h.approvals == approvalsElicitation {
			return func(context.Context, string, json.RawMessage, kernel.Decision) (bool, error) {
				return false, nil // recorded as rejected: nobody else may answer
			}
		}
		return nil
	}
	return func(ctx context.Context, tool string, args json.RawMessage, d kernel.Decision) (bool, error) {
		msg := fmt.Sprintf("The kernel's policy asks for approval to run %s with %s", tool, args)
		if d.Message != "" {
			msg += ": " + d.Message
		}
		if len(d.Rules) > 0 {
			msg += " (rule " + strings.Join(d.Rules, ", ") + ")"
		}
		// What the call would do, as its tool previews it.
		pv, perr := callPreview(ctx, h.k.Tools(), tool, args)
		if more := formatPreview(pv, perr, ""); more != "" {
			msg += "\n\n" + more
		}
		res, err := ss.Elicit(ctx, &sdk.ElicitParams{Message: msg, RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`)})
		if err != nil {
			return false, err
		}
		return res.Action == "accept", nil
	}
}

func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
