package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dsnForm is how a DSN is written, for the error about one that is not.
const dsnForm = "postgres://USER:PASSWORD@HOST:PORT/DATABASE, or key=value pairs such as host=HOST port=PORT user=USER dbname=DATABASE"

// parseDSN parses dsn into a pool configuration with the options applied.
// A DSN that does not parse is an error that never repeats the DSN (it
// may hold a password).
func parseDSN(dsn string, opts Options) (*pgxpool.Config, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, errors.New("the DSN is empty (" + dsnForm + ")")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message quotes the DSN with the password masked, best
		// effort; only what follows the quote (the reason) is kept.
		reason := ""
		if i := strings.LastIndex(err.Error(), "`: "); i >= 0 {
			reason = ": " + err.Error()[i+3:]
		}
		return nil, errors.New("the DSN is not a PostgreSQL connection string (" + dsnForm + ")" + reason)
	}
	cfg.MaxConns = 16
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cc := cfg.ConnConfig
	if opts.ConnectTimeout > 0 {
		cc.ConnectTimeout = opts.ConnectTimeout
	} else if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = 10 * time.Second
	}
	st := opts.StatementTimeout
	if st <= 0 {
		st = 30 * time.Second
	}
	if _, set := cc.RuntimeParams["statement_timeout"]; !set {
		cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(st.Milliseconds(), 10)
	}
	if _, set := cc.RuntimeParams["application_name"]; !set {
		cc.RuntimeParams["application_name"] = "agentkernel"
	}
	return cfg, nil
}

// describe names the database cfg reaches: user@host:port/database.
func describe(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	host := cc.Host
	if strings.HasPrefix(host, "/") {
		host = "socket " + host
	}
	return fmt.Sprintf("%s@%s:%d/%s", cc.User, host, cc.Port, cc.Database)
}

// connect opens a pool on dsn and checks that the database answers.
func connect(ctx context.Context, dsn string, opts Options) (*pgxpool.Pool, string, error) {
	cfg, err := parseDSN(dsn, opts)
	if err != nil {
		return nil, "", fmt.Errorf("open session database: %w", err)
	}
	where := describe(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, where, fmt.Errorf("open session database %s: %s", where, scrubDSN(err.Error(), cfg.ConnConfig.Password))
	}
	if err := pool.Ping(ctx); err != nil {
		cerr := connectError(where, cfg.ConnConfig.User, cfg.ConnConfig.Database, cfg.ConnConfig.Password, err)
		if opts.WaitForDatabase && errors.Is(cerr, ErrUnavailable) {
			return pool, where, nil // the schema check says it again, and Open waits
		}
		pool.Close()
		return nil, where, cerr
	}
	return pool, where, nil
}

// connectError says what failed when connecting: the server could not be
// reached, it refused the user or the password, or the database does not
// exist. The password never appears.
func connectError(where, user, db, password string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01":
			return fmt.Errorf("open session database %s: password authentication failed for user %q: check the password in the DSN", where, user)
		case "28000":
			return fmt.Errorf("open session database %s: the server refused user %q (%s): check the user and the server's pg_hba.conf", where, user, pe.Message)
		case "3D000":
			return fmt.Errorf("open session database %s: database %q does not exist: create it (createdb %s) and run kernel store migrate", where, db, db)
		case "53300":
			return fmt.Errorf("open session database %s: %w: the server has no connection slot left (%s)", where, ErrUnavailable, pe.Message)
		}
		return fmt.Errorf("open session database %s: %s", where, scrubDSN(pe.Error(), password))
	}
	if unreachable(err) {
		return fmt.Errorf("open session database %s: %w: cannot reach the server (%s)", where, ErrUnavailable, reason(err))
	}
	return fmt.Errorf("open session database %s: %s", where, scrubDSN(err.Error(), password))
}

// reason is the innermost error of a connection failure, which says what
// happened (connection refused, no such host, i/o timeout).
func reason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return "timed out"
	}
	return err.Error()
}

// unreachable reports whether err says the database could not be reached
// or the connection broke: the operation did not (or may not have)
// happened, and may work once the server is back.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // admin/crash shutdown, cannot connect now
			pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, pgconn.ErrConnClosed) || pgconn.Timeout(err)
}

// retryable reports whether the statement certainly did not take effect
// and may simply be sent again: a serialization failure, a deadlock, a
// statement or lock timeout (the server rolled it back), or a failure
// before anything was sent.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "57014", "55P03":
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err)
}

// classify wraps err from operation op: ErrUnavailable when the database
// could not be reached.
func (s *Store) classify(op string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return fmt.Errorf("%s: the database user may not do this (%s): grant it the privileges docs/sessions.md lists", op, pe.Message)
	}
	if unreachable(err) {
		return fmt.Errorf("%s: %w (%s): %s", op, ErrUnavailable, s.where, reason(err))
	}
	return fmt.Errorf("%s: %w", op, err)
}

// retry runs fn until it succeeds, fails for a reason that is not safe to
// retry, ctx ends, or Options.RetryFor has passed.
func (s *Store) retry(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	deadline := time.Now().Add(s.opts.RetryFor)
	wait := 20 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || !retryable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}
