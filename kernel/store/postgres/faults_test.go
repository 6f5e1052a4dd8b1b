package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// TestOpenErrors: every way of failing to open names what failed (the
// DSN's form, the server, the user, the database, the schema, the
// privileges) and says what to do, and none shows the password.
func TestOpenErrors(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	migrated := srv.Migrated(t)
	db := func(dsn string) string { u, _ := url.Parse(dsn); return strings.TrimPrefix(u.Path, "/") }
	dbName := db(migrated)
	// A user that may log in and nothing else.
	if err := srv.Exec(dbName, `CREATE ROLE weakling LOGIN PASSWORD 'weak-secret-pw'`); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	empty := srv.NewDatabase(t)
	older := srv.Migrated(t)
	if err := srv.Exec(db(older), `DELETE FROM ak_schema`); err != nil {
		t.Fatal(err)
	}
	newer := srv.Migrated(t)
	if err := srv.Exec(db(newer), `INSERT INTO ak_schema (version, name) VALUES (99, 'future')`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dsn string
		want      []string
		is        error
	}{
		{"not a DSN", "postgres://ak:hunter2@[::1:5432/x", []string{"not a PostgreSQL connection string", "postgres://USER:PASSWORD@HOST:PORT/DATABASE"}, nil},
		{"empty", " ", []string{"the DSN is empty"}, nil},
		{"bad option", "postgres://ak:hunter2@127.0.0.1/x?sslmode=bogus", []string{"not a PostgreSQL connection string", "sslmode is invalid"}, nil},
		{"unreachable", fmt.Sprintf("postgres://ak:hunter2@127.0.0.1:%d/x?sslmode=disable&connect_timeout=5", freePort(t)), []string{"cannot reach the server", "connection refused"}, postgres.ErrUnavailable},
		{"wrong password", srv.UserDSN(pgtest.Superuser, "hunter2", dbName), []string{"password authentication failed for user \"ak\"", "check the password"}, nil},
		{"no database", srv.UserDSN(pgtest.Superuser, srv.Password(), "nosuchdb"), []string{`database "nosuchdb" does not exist`, "createdb nosuchdb", "kernel store migrate"}, nil},
		{"no schema", empty, []string{"no agentkernel tables yet", "run kernel store migrate"}, postgres.ErrSchema},
		{"older schema", older, []string{fmt.Sprintf("version 0, older than this kernel needs (%d)", postgres.SchemaVersion()), "run kernel store migrate"}, postgres.ErrSchema},
		{"newer schema", newer, []string{fmt.Sprintf("version 99, newer than this kernel knows (%d)", postgres.SchemaVersion()), "upgrade the kernel"}, postgres.ErrSchema},
		{"no privileges", srv.UserDSN("weakling", "weak-secret-pw", dbName), []string{"may not read and write ak_schema, ak_sessions", "GRANT SELECT, INSERT, UPDATE, DELETE"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := postgres.Open(ctx, c.dsn, postgres.Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			for _, pw := range []string{"hunter2", srv.Password(), "weak-secret-pw"} {
				if strings.Contains(msg, pw) {
					t.Errorf("error %q shows a password", msg)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
		})
	}
	t.Run("migrate without privileges", func(t *testing.T) {
		_, err := postgres.Migrate(ctx, srv.UserDSN("weakling", "weak-secret-pw", db(empty)), postgres.Options{})
		if err == nil || !strings.Contains(err.Error(), `user "weakling" may not change the schema`) || strings.Contains(err.Error(), "weak-secret-pw") {
			t.Fatalf("Migrate as a user without CREATE = %v", err)
		}
	})
	t.Run("migrate refuses a newer schema", func(t *testing.T) {
		if _, err := postgres.Migrate(ctx, newer, postgres.Options{}); !errors.Is(err, postgres.ErrSchema) {
			t.Fatalf("Migrate of a newer schema = %v, want ErrSchema", err)
		}
	})
}

func freePort(t *testing.T) int {
	srv := pgtest.Shared(t)
	return srv.Port() + 1 // nothing listens next to the test server; connect is refused at once
}

// TestMigrateConcurrently: replicas starting at once migrate one after
// the other; the schema is applied once.
func TestMigrateConcurrently(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	var wg sync.WaitGroup
	res := make(chan postgres.MigrateResult, 4)
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := postgres.Migrate(context.Background(), dsn, postgres.Options{})
			if err != nil {
				errs <- err
				return
			}
			res <- r
		}()
	}
	wg.Wait()
	close(res)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	applied := 0
	for r := range res {
		applied += len(r.Applied)
		if r.To != postgres.SchemaVersion() {
			t.Fatalf("migrated to %d, want %d", r.To, postgres.SchemaVersion())
		}
	}
	if applied != postgres.SchemaVersion() {
		t.Fatalf("%d migrations applied by 4 concurrent runs, want %d (each once)", applied, postgres.SchemaVersion())
	}
}

// TestStatementTimeoutRetried: a step whose session row is locked by
// someone else times out on the server (statement_timeout); the store
// retries it, and it lands once the lock is gone. When the lock outlasts
// RetryFor, the failure is reported, and nothing was written.
func TestStatementTimeoutRetried(t *testing.T) {
	s, dsn := openStore(t, postgres.Options{StatementTimeout: 100 * time.Millisecond, RetryFor: 5 * time.Second})
	ctx := context.Background()
	if err := s.Commit(ctx, "locked", kernel.Step{Messages: []kernel.Message{{Seq: 1, Role: kernel.RoleUser, Content: "a"}}}); err != nil {
		t.Fatal(err)
	}
	hold := func() (release func()) {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM ak_sessions WHERE id = 'locked' FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		return func() { tx.Rollback(ctx); c.Close(ctx) }
	}
	release := hold()
	done := make(chan error, 1)
	go func() {
		done <- s.Commit(ctx, "locked", kernel.Step{Messages: []kernel.Message{{Seq: 2, Role: kernel.RoleUser, Content: "b"}}})
	}()
	time.Sleep(600 * time.Millisecond) // several statement timeouts
	release()
	if err := <-done; err != nil {
		t.Fatalf("a step that timed out while the row was locked, then could go: %v", err)
	}
	s2, err := postgres.Open(ctx, dsn, postgres.Options{StatementTimeout: 50 * time.Millisecond, RetryFor: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	release = hold()
	err = s2.Commit(ctx, "locked", kernel.Step{Messages: []kernel.Message{{Seq: 3, Role: kernel.RoleUser, Content: "c"}}})
	release()
	if err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("a step whose row stayed locked past RetryFor: %v, want the statement timeout reported", err)
	}
	se, err := s.Load(ctx, "locked")
	if err != nil || len(se.Messages) != 2 {
		t.Fatalf("after the timed-out step: %d messages, %v; want 2", len(se.Messages), err)
	}
}

// TestDatabaseGoneMidRun: the database stops while a run's tool call is
// in flight; the run ends at the next step boundary with an error that
// says the database is unavailable (nothing half written); once the
// database is back the session loads with every step acknowledged before,
// and Continue resumes the run to the end.
func TestDatabaseGoneMidRun(t *testing.T) {
	// A server of its own: it is killed.
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		pgtest.Shared(t) // fails or skips the way a missing server does
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	dsn := srv.Migrated(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{RetryFor: time.Second, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gate, started := make(chan struct{}), make(chan struct{}, 1)
	reg := kernel.NewRegistry()
	if err := reg.Register(kerneltest.NewRecorder("note", kernel.TierSideEffecting, "noted"), gateToolFor(gate, started)); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Store: s, Tools: reg, Provider: kerneltest.NewProvider(
		kerneltest.Calls("note", map[string]string{"text": "one"}),
		kerneltest.Calls("gate", map[string]string{}),
		kerneltest.Text("done"))})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res *kernel.RunResult
		err error
	}
	out := make(chan result, 1)
	go func() {
		res, err := k.Run(ctx, "", "go")
		out <- result{res, err}
	}()
	<-started
	srv.Kill()
	close(gate)
	r := <-out
	if r.err == nil || !errors.Is(r.err, postgres.ErrUnavailable) {
		t.Fatalf("the run with the database gone ended with %v, want an error wrapping ErrUnavailable", r.err)
	}
	sid := r.res.SessionID
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	se, err := s.Load(ctx, sid)
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	// prompt, the note call and its result, the gate call: acknowledged
	// before the database went away.
	if len(se.Messages) != 4 || se.Messages[3].ToolCalls[0].Name != "gate" || se.Meta.Status != kernel.StatusRunning {
		t.Fatalf("after the restart: %d messages, status %s", len(se.Messages), se.Meta.Status)
	}
	k2, err := kernel.New(kernel.Config{Store: s, Tools: reg, Provider: kerneltest.NewProvider(kerneltest.Text("done"))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k2.Continue(ctx, sid)
	if err != nil || res.Output != "done" {
		t.Fatalf("Continue after the database came back: %v, %v", res, err)
	}
	se, _ = s.Load(ctx, sid)
	if got := se.Messages[4]; got.Role != kernel.RoleTool || got.Content != kernel.Interrupted {
		t.Fatalf("the gate call's result is %+v, want the interrupted answer (its result never reached the database)", got)
	}
}

func gateToolFor(gate <-chan struct{}, started chan<- struct{}) kernel.Tool {
	return kernel.NewTool(kernel.ToolSpec{Name: "gate", Description: "waits", Tier: kernel.TierSideEffecting, Source: "test",
		Schema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			started <- struct{}{}
			<-gate
			return kernel.Result{Content: "gate open"}, nil
		})
}
