package mcp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
)

// Errors callers branch on.
var (
	// ErrClosed: the host was closed.
	ErrClosed = errors.New("mcp host closed")
	// ErrUnavailable: the server's circuit breaker is open.
	ErrUnavailable = errors.New("mcp server unavailable")
)

// HostConfig configures a Host.
type HostConfig struct {
	// Logger receives the host's log and every server's stderr (default:
	// discard).
	Logger hclog.Logger
	// Workspace replaces "{workspace}" in stdio commands and is their
	// default working directory.
	Workspace string
	// OnNotice receives operator notices (circuit breaker, reported tools).
	OnNotice func(kernel.Notice)
	// OnToolsChanged receives a server's new tool list after it sent
	// notifications/tools/list_changed (with the tools that were left
	// out); the caller syncs its registry (kernel.Registry.Sync with
	// source "mcp:<server>"). It is called from a goroutine the host owns.
	OnToolsChanged func(server string, tools []kernel.Tool, problems []Problem)
	// CacheDir, when set, keeps each server's last tool list (0600 files),
	// so that Load needs no process and a stdio server starts at its first
	// call. Empty means no cache: Load connects.
	CacheDir string
	// AllowMissing names the sandbox layers a stdio server may run without
	// where this machine lacks them (sandbox: {allow_missing: [...]}).
	AllowMissing []sandbox.Layer
}

// Host connects to the configured MCP servers and turns their tools into
// kernel tools. It is safe for concurrent use.
type Host struct {
	cfg HostConfig
	log hclog.Logger
	ctx context.Context
	// stop cancels ctx: processes die, waits end.
	stop context.CancelFunc

	mu      sync.Mutex
	servers map[string]*server
	order   []string
	closing bool
	wg      sync.WaitGroup // watchers, refreshes and starts in flight
}

// NewHost returns a host with no servers.
func NewHost(cfg HostConfig) *Host {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Host{cfg: cfg, log: cfg.Logger, ctx: ctx, stop: stop, servers: map[string]*server{}}
}

// Problem is a tool of a server that was left out, and why.
type Problem struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

func (p Problem) String() string {
	return fmt.Sprintf("mcp server %s: tool %q left out: %s", p.Server, p.Tool, p.Reason)
}

// Load validates sc, connects to the server (starting a stdio server) and
// returns its tools, each named "<server>.<tool>" with source
// "mcp:<server>". A tool whose schema does not compile, is larger than
// MaxSchemaBytes or whose name is not a valid tool name is left out and
// reported in problems (and as a notice); that is not an error. An error
// means the configuration is wrong or the server could not be reached.
func (h *Host) Load(ctx context.Context, sc ServerConfig) ([]kernel.Tool, []Problem, error) {
	cfg, err := sc.normalize(h.cfg.Workspace)
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, nil, ErrClosed
	}
	if _, dup := h.servers[cfg.Name]; dup {
		h.mu.Unlock()
		return nil, nil, serverError(cfg.Name, "name", errors.New("is used by another server"))
	}
	s := newServer(h, cfg)
	h.servers[cfg.Name] = s
	h.order = append(h.order, cfg.Name)
	h.mu.Unlock()
	var (
		tools    []kernel.Tool
		problems []Problem
	)
	if cached, ok := h.readCache(cfg); ok {
		tools, problems = s.convertAll(cached)
		s.mu.Lock()
		s.verify = true // list again at the first connection
		s.mu.Unlock()
	} else if tools, problems, err = s.listTools(ctx); err != nil {
		return nil, nil, err
	}
	for _, p := range problems {
		h.notice("warn", cfg.Name, p.String())
	}
	return tools, problems, nil
}

// begin registers an operation that must finish before Close returns.
func (h *Host) begin() (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil, ErrClosed
	}
	h.wg.Add(1)
	return h.wg.Done, nil
}

// refreshLater re-lists s's tools in the background: after list_changed,
// or at the first connection of a server whose tools came from the cache
// (then only a difference is reported).
func (h *Host) refreshLater(s *server, onlyIfChanged bool) {
	done, err := h.begin()
	if err != nil {
		return
	}
	go func() {
		defer done()
		remote, err := s.fetchTools(h.ctx)
		if err != nil {
			s.log.Error("refresh tools", "error", err)
			return
		}
		if changed := h.writeCache(s.cfg, remote); onlyIfChanged && !changed {
			return
		}
		tools, problems := s.convertAll(remote)
		s.log.Info("tools changed", "tools", len(tools), "left_out", len(problems))
		for _, p := range problems {
			h.notice("warn", s.cfg.Name, p.String())
		}
		if h.cfg.OnToolsChanged != nil {
			h.cfg.OnToolsChanged(s.cfg.Name, tools, problems)
		}
	}()
}

func (h *Host) notice(level, server, text string) {
	if h.cfg.OnNotice != nil {
		h.cfg.OnNotice(kernel.Notice{Source: "mcp:" + server, Level: level, Text: text})
	}
}

// Close stops every server and waits for the host's goroutines.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closing = true
	servers := make([]*server, 0, len(h.servers))
	for _, s := range h.servers {
		servers = append(servers, s)
	}
	h.mu.Unlock()
	for _, s := range servers {
		s.close()
	}
	h.stop()
	h.wg.Wait()
	return nil
}

// Connect connects every server that is not connected (starting stdio
// servers), so that Servers shows their live state, and returns each
// server's error by name (nil for a server that is connected).
func (h *Host) Connect(ctx context.Context) map[string]error {
	h.mu.Lock()
	servers := make([]*server, 0, len(h.order))
	for _, n := range h.order {
		servers = append(servers, h.servers[n])
	}
	h.mu.Unlock()
	errs := make(map[string]error, len(servers))
	for _, s := range servers {
		_, errs[s.cfg.Name] = s.session(ctx)
	}
	return errs
}

// ServerStatus is what `kernel mcp ls` shows of one server.
type ServerStatus struct {
	Name      string       `json:"name"`
	Transport string       `json:"transport"` // stdio or http
	Target    string       `json:"target"`    // the command line or URL
	State     State        `json:"state"`
	PID       int          `json:"pid,omitempty"`
	Crashes   int          `json:"crashes,omitempty"`
	LastError string       `json:"last_error,omitempty"`
	Tools     []ToolStatus `json:"tools"`
	Problems  []Problem    `json:"problems,omitempty"`
}

// ToolStatus is one tool of a server as the kernel registered it.
type ToolStatus struct {
	Name        string      `json:"name"`   // as registered: server.tool
	Remote      string      `json:"remote"` // as the server names it
	Tier        kernel.Tier `json:"tier"`
	Hints       []string    `json:"hints,omitempty"` // the server's annotations
	Description string      `json:"description,omitempty"`
}

// Servers reports every loaded server, in load order.
func (h *Host) Servers() []ServerStatus {
	h.mu.Lock()
	names := append([]string(nil), h.order...)
	servers := make([]*server, len(names))
	for i, n := range names {
		servers[i] = h.servers[n]
	}
	h.mu.Unlock()
	out := make([]ServerStatus, len(servers))
	for i, s := range servers {
		out[i] = s.status()
	}
	return out
}

func (s *server) status() ServerStatus {
	st := ServerStatus{Name: s.cfg.Name, Transport: "stdio", Target: strings.Join(s.cfg.Command, " ")}
	if s.cfg.URL != "" {
		st.Transport, st.Target = "http", s.cfg.URL
	}
	s.mu.Lock()
	st.State, st.PID, st.Crashes, st.LastError = s.state, s.pid, s.crashes.Failures(), s.lastError
	st.Tools = append([]ToolStatus(nil), s.listed...)
	st.Problems = append([]Problem(nil), s.problems...)
	s.mu.Unlock()
	sort.Slice(st.Tools, func(i, j int) bool { return st.Tools[i].Name < st.Tools[j].Name })
	return st
}
