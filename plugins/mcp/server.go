package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentkernel/agentkernel/internal/backoff"
	"github.com/agentkernel/agentkernel/internal/supervise"
	"github.com/agentkernel/agentkernel/sandbox/proc"
)

// State is where a server is in its life.
type State string

// The states of a server.
const (
	StateIdle     State = "idle"     // configured, not started (or stopped cleanly)
	StateRunning  State = "running"  // connected
	StateCrashed  State = "crashed"  // the last connection died; the next call restarts it
	StateOpen     State = "disabled" // circuit breaker open after repeated crashes
	StateClosed   State = "closed"   // the host is closed
	StateStarting State = "starting" // connecting
)

// server owns one configured MCP server: at most one connection (and, for
// stdio, its process), which it opens on demand, reopens after a crash with
// backoff, and stops opening (circuit breaker) after too many consecutive
// crashes. Safe for concurrent use.
type server struct {
	h      *Host
	cfg    ServerConfig
	log    hclog.Logger
	client *mcp.Client
	stderr *stderrLog

	mu        sync.Mutex
	sess      *mcp.ClientSession
	gone      chan struct{} // closed when sess is found dead
	pid       int
	starting  *supervise.Attempt
	state     State
	crashes   backoff.Breaker // consecutive failures: restart backoff and circuit breaker
	lastError string
	closed    bool
	verify    bool // tools came from the cache: list again once connected
	// listed and problems are the last tool list: registered and left out.
	listed   []ToolStatus
	problems []Problem

	gate supervise.Gate[*mcp.ClientSession] // session's state machine over the fields above, built by newServer

	progressMu sync.Mutex
	progress   map[string]func(string)
	nextToken  atomic.Int64
}

func newServer(h *Host, cfg ServerConfig) *server {
	s := &server{h: h, cfg: cfg, log: h.log.Named(cfg.Name), state: StateIdle, progress: map[string]func(string){},
		crashes: backoff.Restarts(cfg.Restart.MaxCrashes, cfg.Restart.Backoff.D(), cfg.Restart.Cooldown.D())}
	s.stderr = &stderrLog{log: s.log}
	s.initGate()
	s.client = mcp.NewClient(&mcp.Implementation{Name: "agentkernel", Version: "1"}, &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{}, // no roots, sampling or elicitation
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { s.h.refreshLater(s, false) },
		ProgressNotificationHandler: s.onProgress,
	})
	return s
}

// session returns a live session, connecting first if needed: it waits for
// a connection in progress, waits out the backoff after a crash, and
// refuses while the circuit breaker is open (internal/supervise).
func (s *server) session(ctx context.Context) (*mcp.ClientSession, error) {
	return s.gate.Acquire(ctx)
}

// initGate builds the server's Gate (once, in newServer: building it per
// call would allocate its closures per call).
func (s *server) initGate() {
	s.gate = supervise.Gate[*mcp.ClientSession]{
		Mu: &s.mu, Live: &s.sess, Starting: &s.starting, Crashes: &s.crashes, Closed: &s.closed, ErrClosed: ErrClosed,
		Refused: func(time.Time) error {
			return fmt.Errorf("%w: server %s failed %d times in a row (last: %s); its tools are disabled until %s, then the kernel tries again",
				ErrUnavailable, s.cfg.Name, s.crashes.Failures(), s.lastError, s.crashes.Until().Format(time.TimeOnly))
		},
		Start: s.connect,
		Begin: func() { s.state = StateStarting },
		End: func(err error, counted bool) {
			switch {
			case counted:
				s.recordCrashLocked(err)
			case err != nil && s.state == StateStarting:
				s.state = StateIdle
			}
		},
	}
}

// connect waits out the backoff, starts the process or reaches the URL,
// completes the initialize handshake and installs the session with a
// watcher that notices when it dies.
func (s *server) connect(ctx context.Context, wait time.Duration) (*mcp.ClientSession, error) {
	done, err := s.h.begin()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := backoff.Sleep(ctx, s.h.ctx.Done(), ErrClosed, wait); err != nil {
		return nil, err
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout.D())
	defer cancel()
	if s.cfg.URL != "" {
		hdr, err := s.cfg.headers()
		if err != nil {
			return nil, err
		}
		endpoint, err := s.cfg.endpoint()
		if err != nil {
			return nil, err
		}
		t := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: headerTransport{hdr, http.DefaultTransport}}, MaxRetries: -1}
		sess, err := s.client.Connect(cctx, t, nil)
		if err != nil {
			return nil, s.startError(err)
		}
		return s.install(sess, 0, start), nil
	}
	// The process lives as long as the host, not as the call that started it.
	cmd, err := command(s.h.ctx, s.cfg, s.h.cfg.AllowMissing, s.stderr)
	if err != nil {
		return nil, err
	}
	sess, err := s.client.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		_ = proc.Kill(cmd)
		return nil, s.startError(err)
	}
	return s.install(sess, cmd.Process.Pid, start), nil
}

func (s *server) startError(err error) error {
	if tail := s.stderr.lastLines(); tail != "" {
		return fmt.Errorf("start mcp server %s: %w; its stderr ends: %s%s", s.cfg.Name, err, tail, permissionHint(s.cfg.Name, tail))
	}
	return fmt.Errorf("start mcp server %s: %w", s.cfg.Name, err)
}

// The permission errors of the runtimes MCP servers are written in, each
// with the path it names: Node ("EACCES: permission denied, open
// '/x'"), Python ("[Errno 13] Permission denied: '/x'"), and C programs and
// shells ("/x: Permission denied").
var (
	nodeDenied   = regexp.MustCompile(`E(?:ACCES|PERM): [^,\n]*, (\w+) '([^'\n]+)'`)
	pythonDenied = regexp.MustCompile(`(?:PermissionError|Errno 13)[^'\n]*'([^'\n]+)'`)
	plainDenied  = regexp.MustCompile(`(/[^\s:'"]+): (?:Permission denied|Operation not permitted)`)
)

// writingCalls are the Node system calls an EACCES names that write.
var writingCalls = map[string]bool{"mkdir": true, "rmdir": true, "unlink": true, "rename": true, "write": true,
	"copyfile": true, "symlink": true, "link": true, "utime": true, "chmod": true, "chown": true}

// permissionHint is what to add to a server's grant when its stderr says
// the sandbox refused a path ("" when it does not): the path and the exact
// grant line.
func permissionHint(name, stderr string) string {
	path, mode := "", "ro"
	if m := nodeDenied.FindStringSubmatch(stderr); m != nil {
		path = m[2]
		if writingCalls[m[1]] {
			mode = "rw"
		}
	} else if m := pythonDenied.FindStringSubmatch(stderr); m != nil {
		path = m[1]
	} else if m := plainDenied.FindStringSubmatch(stderr); m != nil {
		path = m[1]
	}
	if path == "" {
		return ""
	}
	return fmt.Sprintf("\nthe sandbox denied the server access to %s (docs/sandbox.md); if it needs that path, add it to the server's grant in tools.mcp (name: %s):\n  grant: {fs: [{path: %s, mode: %s}]}",
		path, name, path, mode)
}

func (s *server) install(sess *mcp.ClientSession, pid int, start time.Time) *mcp.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go sess.Close()
		return sess
	}
	gone := make(chan struct{})
	s.sess, s.gone, s.pid, s.state = sess, gone, pid, StateRunning
	s.log.Debug("mcp server connected", "pid", pid, "in", time.Since(start))
	if s.verify {
		s.verify = false
		s.h.refreshLater(s, true)
	}
	s.h.wg.Add(1)
	go func() {
		defer s.h.wg.Done()
		err := sess.Wait()
		defer close(gone)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.sess != sess {
			return
		}
		s.sess, s.pid = nil, 0
		if s.closed {
			return
		}
		why := "connection closed"
		if err != nil {
			why = err.Error()
		}
		if tail := s.stderr.lastLines(); tail != "" && s.cfg.URL == "" {
			why += "; its stderr ends: " + tail + permissionHint(s.cfg.Name, tail)
		}
		s.log.Error("mcp server went away", "error", why)
		s.recordCrashLocked(errors.New(why))
	}()
	return sess
}

// recordCrashLocked counts a failure and opens the circuit breaker once
// MaxCrashes are reached in a row.
func (s *server) recordCrashLocked(err error) {
	s.lastError = err.Error()
	s.state = StateCrashed
	if s.crashes.Failure(time.Now()) {
		s.state = StateOpen
		s.h.notice("error", s.cfg.Name, fmt.Sprintf("mcp server %s failed %d times in a row; its tools are unavailable until %s",
			s.cfg.Name, s.crashes.Failures(), s.crashes.Until().Format(time.TimeOnly)))
	}
}

// answered is called when the server answered a call: it is healthy.
func (s *server) answered() {
	s.mu.Lock()
	wasOpen := s.crashes.Success()
	s.mu.Unlock()
	if wasOpen {
		s.h.notice("info", s.cfg.Name, fmt.Sprintf("mcp server %s answers again; its tools are available", s.cfg.Name))
	}
}

// awaitGone waits (up to d) for the watcher of sess to find it dead and
// reports whether it did: a call that failed because the server died
// returns after the crash is counted and its stderr is in.
func (s *server) awaitGone(sess *mcp.ClientSession, d time.Duration) bool {
	s.mu.Lock()
	gone := s.gone
	cur := s.sess
	s.mu.Unlock()
	if cur != sess {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-gone:
		return true
	case <-t.C:
		return false
	}
}

// close ends the session (and stops the process).
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	s.state = StateClosed
	sess := s.sess
	s.sess = nil
	s.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
}

// withProgress registers fn for the progress notifications of one call and
// returns its token and the function that unregisters it.
func (s *server) withProgress(fn func(string)) (string, func()) {
	tok := s.cfg.Name + "-" + strconv.FormatInt(s.nextToken.Add(1), 10)
	s.progressMu.Lock()
	s.progress[tok] = fn
	s.progressMu.Unlock()
	return tok, func() {
		s.progressMu.Lock()
		delete(s.progress, tok)
		s.progressMu.Unlock()
	}
}

func (s *server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p := req.Params
	tok, _ := p.ProgressToken.(string)
	s.progressMu.Lock()
	fn := s.progress[tok]
	s.progressMu.Unlock()
	if fn == nil {
		return
	}
	text := p.Message
	switch {
	case p.Total > 0:
		text = fmt.Sprintf("%s (%g/%g)", text, p.Progress, p.Total)
	case p.Progress > 0:
		text = fmt.Sprintf("%s (%g)", text, p.Progress)
	}
	fn(text)
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	h    map[string]string
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.h {
		req.Header.Set(k, v)
	}
	return t.next.RoundTrip(req)
}
