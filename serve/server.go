package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/policy"
)

// Config configures a Server. Kernel, Store, Queue and Keys are required;
// every other zero value means the documented default. A Config must not
// be modified after New.
type Config struct {
	// Kernel runs the sessions; the server runs each run through a
	// Kernel.With view carrying the caller's key name and the session's
	// event sink.
	Kernel *kernel.Kernel
	// Store is the Kernel's store. It must implement kernel.EventLog (the
	// event streams replay from it); kernel.SessionDeleter enables DELETE.
	Store kernel.Store
	// Queue holds steering and follow-up messages (the Kernel's Inbox): a
	// *queue.Dir beside a Badger store, the store's own queue on a shared
	// store (replica.Shared.Queue(Replica)).
	Queue replica.Queue
	// Agents are the named agents and pipelines (GET /v1/agents); a
	// session created for one runs through its kernel.
	Agents []Agent
	// Keys are the API keys.
	Keys *KeyStore
	// Policy is the policy in effect, for GET /v1/policy and explain; nil
	// means none (every call allowed).
	Policy *policy.Watcher
	// SessionContext is recorded in the sessions the API creates.
	SessionContext *kernel.SessionContext
	// Scrub redacts credentials (the configured scrubber) in events and
	// logged errors; nil uses none.
	Scrub func(string) string
	// AccessLog receives one JSON line per request (no bodies, no
	// credentials); nil discards them. ErrorLog receives the server's
	// own problems; nil discards them.
	AccessLog io.Writer
	ErrorLog  io.Writer
	Limits    Limits
	// DrainTimeout bounds a drain (SIGTERM): runs get this long to reach a
	// step boundary before they are cancelled (default 30s).
	DrainTimeout time.Duration
	// AutoResume continues, at start, the sessions a previous process left
	// interrupted; otherwise they wait for POST .../resume.
	AutoResume bool
	// Memory answers GET /v1/memory/search (docs/memory.md); nil answers
	// it with not_implemented.
	Memory MemorySearcher
	// Version is reported by /healthz.
	Version string
	// AllowedHosts are the host names (besides IP addresses, localhost
	// and names under .localhost) the server answers to: the name of its
	// TLS certificate, the public name a proxy forwards. A request for any
	// other Host is refused (403 host_not_allowed), so that a page whose
	// DNS name was re-pointed at the server cannot read it.
	AllowedHosts []string

	// On a store several servers share (the store implements
	// replica.Shared: PostgreSQL), the server is one of its replicas.
	// Replica names it among them (default host-pid-random): it is the
	// holder of the leases of the sessions it runs, and of their steering
	// claims. LeaseTTL is how long a session's lease lasts unrenewed
	// (default 15s): a replica that stops loses its sessions after it,
	// and they are shown interrupted, or continued by another replica
	// with AutoResume. Poll is how often the server looks at the store
	// for what notices may have missed and for sessions to take over
	// (default 1s). Ignored on other stores.
	Replica  string
	LeaseTTL time.Duration
	Poll     time.Duration
}

// Limits bound what clients may ask of the server. Zero values mean the
// defaults (DefaultLimits).
type Limits struct {
	// MaxRuns caps the runs in flight; MaxRunsPerKey caps one key's. More
	// are refused with 429 and Retry-After.
	MaxRuns       int
	MaxRunsPerKey int
	// MaxBodyBytes caps a request body: more is 413.
	MaxBodyBytes int64
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout bound slow clients;
	// WriteTimeout bounds each write of a response, so an event stream
	// whose client stopped reading is dropped without holding anything up.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	WriteTimeout      time.Duration
	// MaxStreams caps the open event streams; MaxStreamsPerKey caps one
	// key's. StreamReserve of MaxStreams are kept for keys with the
	// approve scope (by default one sixteenth of MaxStreams): other keys are refused once MaxStreams-StreamReserve
	// are open, so readers cannot take the approvals inbox offline. More
	// is 429 with Retry-After.
	MaxStreams       int
	MaxStreamsPerKey int
	StreamReserve    int
	// StreamMaxAge ends an event stream that has been open this long
	// with a notice to reconnect (event streams resume from
	// Last-Event-ID; the approvals stream sends the whole list again), so
	// a client that stopped reading but keeps its socket frees its slot.
	StreamMaxAge time.Duration
	// PeerTimeout is how long data the server sent may stay
	// unacknowledged before the operating system drops the connection
	// (TCP_USER_TIMEOUT where there is one): streams send a
	// heartbeat, so a client that vanished (network gone, a laptop
	// asleep) loses its streams after about this long.
	PeerTimeout time.Duration
}

// DefaultLimits are the limits a zero field of Limits means: the one place
// their values are written (kernel serve's flags default to them, and
// docs/serve.md's table of limits is generated from them).
func DefaultLimits() Limits {
	return Limits{
		MaxRuns:           64,
		MaxRunsPerKey:     16,
		MaxBodyBytes:      1 << 20,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxStreams:        4096,
		MaxStreamsPerKey:  64,
		StreamReserve:     4096 / 16,
		StreamMaxAge:      time.Hour,
		PeerTimeout:       45 * time.Second,
	}
}

// withDefaults is l with every zero (or negative) field set from
// DefaultLimits (every field is a number: TestLimitsDefaults), but for
// StreamReserve, one sixteenth of MaxStreams, and less than it.
func (l Limits) withDefaults() Limits {
	reserve := l.StreamReserve
	d := DefaultLimits()
	lv, dv := reflect.ValueOf(&l).Elem(), reflect.ValueOf(d)
	for i := range lv.NumField() {
		if f := lv.Field(i); f.CanInt() && f.Int() <= 0 {
			f.Set(dv.Field(i))
		}
	}
	// StreamReserve's default depends on MaxStreams: one sixteenth.
	if reserve <= 0 {
		l.StreamReserve = max(1, l.MaxStreams/16)
	}
	l.StreamReserve = min(l.StreamReserve, l.MaxStreams-1)
	return l
}

// Server is `kernel serve`: the kernel's HTTP API, its event streams, and
// the approvals page. It is safe for concurrent use.
//
// The lifecycle:
//
//  1. New(cfg) checks the configuration.
//  2. Serve(ctx, ln) serves until ctx is cancelled, then drains: it stops
//     accepting, lets runs reach a step boundary (stored as interrupted,
//     resumable), ends every event stream with a final notice event, and
//     returns within DrainTimeout. Start resumes interrupted sessions
//     first when AutoResume is set.
//  3. Handler serves the same API without a listener (tests).
type Server struct {
	cfg      Config
	lim      Limits
	events   kernel.EventLog
	mux      *http.ServeMux
	hub      *hub
	runs     *runManager
	replicas *replicas
	api      http.Handler

	draining atomic.Bool
	slots    streamSlots
	keyReqs  keyRequests
	started  time.Time

	// keyStop ends the key watcher (watchKeys); keyWG waits for it.
	keyMu   sync.Mutex
	keyStop context.CancelFunc
	keyWG   sync.WaitGroup

	mountMu sync.Mutex
}

// New checks cfg and builds the server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Kernel == nil:
		return nil, errors.New("serve: Config.Kernel is required")
	case cfg.Store == nil:
		return nil, errors.New("serve: Config.Store is required")
	case cfg.Queue == nil:
		return nil, errors.New("serve: Config.Queue is required")
	case cfg.Keys == nil:
		return nil, errors.New("serve: Config.Keys is required")
	}
	el, ok := cfg.Store.(kernel.EventLog)
	if !ok {
		return nil, fmt.Errorf("serve: the store (%T) keeps no events (kernel.EventLog): use the badger or memory store", cfg.Store)
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.Scrub == nil {
		cfg.Scrub = func(s string) string { return s }
	}
	if cfg.AccessLog == nil {
		cfg.AccessLog = io.Discard
	}
	if cfg.ErrorLog == nil {
		cfg.ErrorLog = io.Discard
	}
	s := &Server{cfg: cfg, lim: cfg.Limits.withDefaults(), events: el, mux: http.NewServeMux(), started: time.Now()}
	s.slots.perKey = map[string]int{}
	s.hub = newHub(el, cfg.Scrub, s.logError)
	s.runs = newRunManager(s)
	s.replicas = newReplicas(s)
	if s.replicas.shared() {
		s.hub.announce = func(ctx context.Context, owner string) {
			s.replicas.notify(ctx, replica.Notice{Kind: replica.NoticeInbox, Owner: owner})
		}
	}
	s.routes()
	s.api = s.middleware(s.mux)
	return s, nil
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.api }

// Mount adds a handler beside the API (e.g. a Prometheus /metrics). It
// gets the access log and the limits but no key check: the handler
// decides. Call it before serving.
func (s *Server) Mount(pattern string, h http.Handler) {
	s.mountMu.Lock()
	defer s.mountMu.Unlock()
	s.mux.Handle(pattern, h)
}

// Start resumes the sessions a previous process left interrupted when
// Config.AutoResume is set, starts watching the key file for revocations
// (a revoked key's streams and requests end within a second), and, on a
// shared store, starts listening to the other replicas and sweeping for
// what they left (stopped by a drain, Close or Drain). Serve calls it;
// call it at most once.
func (s *Server) Start(ctx context.Context) error {
	s.replicas.run()
	s.keyMu.Lock()
	if s.keyStop == nil {
		kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		s.keyStop = stop
		s.keyWG.Go(func() { s.watchKeys(kctx) })
	}
	s.keyMu.Unlock()
	if s.replicas.shared() {
		// The sweep, every Poll, continues what other replicas left
		// (with AutoResume) and starts the waiting follow-ups; a
		// database that is away at start is no reason to fail.
		return nil
	}
	if s.cfg.AutoResume {
		if err := s.runs.autoResume(ctx); err != nil {
			return err
		}
	}
	s.runs.startQueued(ctx) // the follow-ups a stopped server accepted
	return nil
}

// Serve serves on ln until ctx is cancelled, then drains (see Server). A
// non-nil tlsConfig serves HTTPS.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config) error {
	srv := &http.Server{
		Handler:           s.api,
		ReadHeaderTimeout: s.lim.ReadHeaderTimeout,
		ReadTimeout:       s.lim.ReadTimeout,
		IdleTimeout:       s.lim.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         tlsConfig,
		ErrorLog:          nil,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	ln = peerTimeoutListener{Listener: ln, timeout: s.lim.PeerTimeout}
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		s.runs.stopAll()
		s.halt()
		return err
	case <-ctx.Done():
	}
	return s.drain(srv, errc)
}

// drain stops srv the way Serve documents.
func (s *Server) drain(srv *http.Server, errc chan error) error {
	deadline := time.Now().Add(s.cfg.DrainTimeout)
	s.runs.interruptAll() // first: whoever sees the drain sees the runs told
	s.draining.Store(true)
	shutCtx, cancel := context.WithDeadline(context.Background(), deadline.Add(2*time.Second))
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(shutCtx) }() // closes the listeners now
	s.runs.drain(deadline)
	s.halt()
	s.hub.closeStreams()
	err := <-shut
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		err = nil
	}
	if serr := <-errc; err == nil && !errors.Is(serr, http.ErrServerClosed) {
		err = serr
	}
	return err
}

// Close stops every run at once (cancelled) and ends the event streams;
// for tests and for a server that never served.
func (s *Server) Close() {
	s.draining.Store(true)
	s.runs.stopAll()
	s.halt()
	s.hub.closeStreams()
}

// halt stops what Start started: the replicas' listener and sweeper, the
// key watcher.
func (s *Server) halt() {
	s.replicas.halt()
	s.keyMu.Lock()
	stop := s.keyStop
	s.keyMu.Unlock()
	if stop != nil {
		stop()
		s.keyWG.Wait()
	}
}

// Drain is the drain of Serve without the listener: stop accepting runs,
// let runs reach a step boundary by DrainTimeout, end the streams.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.runs.drain(time.Now().Add(s.cfg.DrainTimeout))
	s.halt()
	s.hub.closeStreams()
}

func (s *Server) logError(format string, args ...any) {
	line := s.cfg.Scrub(fmt.Sprintf(format, args...))
	fmt.Fprintf(s.cfg.ErrorLog, "%s kernel serve: %s\n", time.Now().UTC().Format(time.RFC3339), line)
}

// Stats is a snapshot of what the server holds.
type Stats struct {
	// Runs are the runs in flight; Streams the open event streams; Topics
	// the sessions with a run or a stream (each holds its recent events).
	Runs, Streams, Topics int
}

// Stats returns what the server holds now (for tests and metrics).
func (s *Server) Stats() Stats {
	s.runs.mu.Lock()
	runs := len(s.runs.active)
	s.runs.mu.Unlock()
	s.hub.mu.Lock()
	topics := len(s.hub.topics)
	s.hub.mu.Unlock()
	return Stats{Runs: runs, Streams: s.streamCount(), Topics: topics}
}
