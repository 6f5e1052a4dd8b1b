// Package postgres is a kernel.Store in a PostgreSQL database, for sessions
// that several processes share: replicas of `kernel serve` on one
// database, any of which may run, approve, steer or take over a session.
//
// Every Commit is one statement (the ak_commit function), so a step is
// stored whole or not at all and is durable when Commit returns (with the
// server's synchronous_commit, on by default). Each session has at most
// one writer at a time, the holder of its lease (kernel.Leaser): every
// step the holder writes carries the lease's fencing token, checked under
// the session row's lock, so a process that paused past its lease cannot
// write late. Events (kernel.EventLog), the steering queue (Queue) and the
// runs of the replicas (replica.Board) live in the same database, and
// changes are announced with LISTEN/NOTIFY (replica.Notifier).
//
// The lifecycle:
//
//  1. Migrate(ctx, dsn) creates or upgrades the schema (`kernel store
//     migrate`). Open refuses a database whose schema is older or newer
//     than this package's, naming the command to run.
//  2. Open(ctx, dsn, Options{}) connects a pool and checks the schema and
//     the privileges; hand the *Store to kernel.Config.Store.
//  3. Close closes the pool.
//
// docs/sessions.md describes the tables and the guarantees; RATIONALE.md
// why a lease row with a fencing token.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	// RATIONALE.md, "github.com/jackc/pgx/v5".
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentkernel/agentkernel/kernel"
)

// Errors callers branch on with errors.Is.
var (
	// ErrUnavailable wraps a failure to reach the database (refused,
	// reset, timed out, shut down). Nothing was stored; the write may be
	// retried once the database is back. It is kernel.ErrStoreUnavailable,
	// so front ends need not know the store.
	ErrUnavailable = kernel.ErrStoreUnavailable
	// ErrSchema is returned by Open for a database whose schema this
	// kernel cannot use: missing, older than it needs, or newer than it
	// knows.
	ErrSchema = errors.New("session database schema mismatch")
)

// Options configures Open. The zero value means the defaults.
type Options struct {
	// MaxConns caps the pool's connections (default 16). Each running
	// session uses one for the length of a statement, not of a run.
	MaxConns int32 `yaml:"max_conns" json:"max_conns"`
	// StatementTimeout bounds one statement on the server (default 30s);
	// a statement over it is retried where that is safe.
	StatementTimeout time.Duration `yaml:"statement_timeout" json:"statement_timeout"`
	// ConnectTimeout bounds one connection attempt (default 10s).
	ConnectTimeout time.Duration `yaml:"connect_timeout" json:"connect_timeout"`
	// RetryFor is how long a write retries failures that are safe to retry
	// (a serialization failure, a deadlock, a statement timeout, a
	// connection lost before the write was sent) before it reports
	// ErrUnavailable (default 5s).
	RetryFor time.Duration `yaml:"retry_for" json:"retry_for"`
	// TTL, when positive, expires sessions not updated for that long: the
	// background sweep (every GCInterval) deletes them. Zero keeps them.
	TTL        time.Duration `yaml:"ttl" json:"ttl"`
	GCInterval time.Duration `yaml:"gc_interval" json:"gc_interval"`
	// Logger receives the store's warnings (default: hclog on stderr at
	// warn level, named "store").
	Logger hclog.Logger `yaml:"-" json:"-"`
	// WaitForDatabase makes Open succeed when the database cannot be
	// reached (refused, timed out, shutting down): a server (kernel
	// serve) starts, says it is not ready, and becomes ready once the
	// database is back. Until the store has reached the database and
	// checked its schema, in the background, every operation fails with
	// ErrUnavailable. Any other failure (a wrong password, no such
	// database, a schema this kernel does not know) still fails Open, or,
	// found once the database is back, every operation.
	WaitForDatabase bool `yaml:"-" json:"-"`
}

// Store is a kernel.Store in PostgreSQL. It is safe for concurrent use,
// also by several processes.
type Store struct {
	pool *pgxpool.Pool
	opts Options
	// where names the database in errors: user, host, port, database,
	// never the password.
	where string

	// checked is set once the schema check passed: until then (a store
	// opened with WaitForDatabase before the database answered) every
	// operation fails with ErrUnavailable, or with broken, the check's
	// failure when the database answered with a schema this kernel
	// cannot use.
	checked atomic.Bool
	broken  atomic.Pointer[error]

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Open connects to the database dsn names (a URL, postgres://user:pass@host:port/db,
// or key=value pairs), checks that it answers, that its schema is the one
// this package knows (else ErrSchema, naming `kernel store migrate` or an
// upgrade), and that the user may read and write the tables. Errors name
// what failed (the DSN's form, the host, the user, the database, the
// table) and never the password.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "store", Level: hclog.Warn})
	}
	if opts.GCInterval == 0 {
		opts.GCInterval = 10 * time.Minute
	}
	if opts.TTL < 0 {
		return nil, errors.New("open session database: negative ttl")
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = 5 * time.Second
	}
	pool, where, err := connect(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, opts: opts, where: where, stop: make(chan struct{})}
	if err := s.checkSchema(ctx); err != nil {
		if !opts.WaitForDatabase || !errors.Is(err, ErrUnavailable) {
			pool.Close()
			return nil, err
		}
		opts.Logger.Warn("the session database cannot be reached; waiting for it", "database", where, "error", err)
		s.wg.Add(1)
		go s.waitForDatabase()
	} else {
		s.checked.Store(true)
	}
	if opts.TTL > 0 {
		s.wg.Add(1)
		go s.sweepLoop()
	}
	return s, nil
}

// Close stops the background sweep and closes the pool. Calling it again
// does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.pool.Close()
	})
	return nil
}

// Where names the database (user, host, port, database; never the
// password), for messages.
func (s *Store) Where() string { return s.where }

// Ping checks that the database answers (kernel serve's /readyz).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.pool.Ping(ctx); err != nil {
		return s.classify("ping", err)
	}
	return nil
}

// waitForDatabase checks the schema, with a backoff, until the database
// answers (then the store works) or Close.
func (s *Store) waitForDatabase() {
	defer s.wg.Done()
	wait := 100 * time.Millisecond
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-s.stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		err := s.checkSchema(ctx)
		cancel()
		switch {
		case err == nil:
			s.checked.Store(true)
			s.opts.Logger.Info("the session database answers", "database", s.where)
			return
		case !errors.Is(err, ErrUnavailable):
			s.broken.Store(&err)
			s.opts.Logger.Error("the session database answers, but cannot be used", "database", s.where, "error", err)
			return
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// usable fails with ErrUnavailable until the store has reached its
// database (WaitForDatabase), or with the reason it cannot use it.
func (s *Store) usable() error {
	if s.checked.Load() {
		return nil
	}
	if p := s.broken.Load(); p != nil {
		return *p
	}
	return fmt.Errorf("%w (%s): not reached since the server started", ErrUnavailable, s.where)
}

// sweepLoop deletes the sessions past the TTL every GCInterval until
// Close.
func (s *Store) sweepLoop() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	every := s.opts.GCInterval
	if every < 0 {
		every = time.Hour
	}
	for {
		if removed, err := s.GC(ctx, s.opts.TTL); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("session TTL sweep failed", "database", s.where, "error", err)
		} else if len(removed) > 0 {
			s.opts.Logger.Info("expired sessions removed", "database", s.where, "count", len(removed), "ttl", s.opts.TTL)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// scrubDSN removes password from s.
func scrubDSN(s, password string) string {
	if password == "" {
		return s
	}
	return strings.ReplaceAll(s, password, "xxxxx")
}

var (
	_ kernel.Store          = (*Store)(nil)
	_ kernel.SessionDeleter = (*Store)(nil)
	_ kernel.EventLog       = (*Store)(nil)
	_ kernel.Leaser         = (*Store)(nil)
	// The export, import, gc and fsck of `kernel sessions` (kernel/store.go).
	_ kernel.SessionExporter  = (*Store)(nil)
	_ kernel.SessionImporter  = (*Store)(nil)
	_ kernel.SessionCollector = (*Store)(nil)
	_ kernel.StoreChecker     = (*Store)(nil)
)
