package postgres_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
)

// TestUpgradeFromVersion1: a database a version-1 kernel wrote (a session
// with events, through version 1's ak_append_events) migrates to the
// current schema in one step, and its log goes on without a gap: the
// events already there keep their ids and the next append gets the next.
func TestUpgradeFromVersion1(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	u, _ := url.Parse(dsn)
	db := strings.TrimPrefix(u.Path, "/")
	v1, err := os.ReadFile("migrations/0001_sessions.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`CREATE TABLE ak_schema (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`,
		string(v1),
		`INSERT INTO ak_schema (version, name) VALUES (1, 'sessions')`,
		`INSERT INTO ak_sessions (id, meta, status, updated) VALUES ('old', '{"status":"idle"}', 'idle', now())`,
		`SELECT ak_append_events('old', ARRAY['a','b'], ARRAY[now(), now()], ARRAY['{}'::bytea, '{}'::bytea])`,
	} {
		if err := srv.Exec(db, sql); err != nil {
			t.Fatalf("%.60s: %v", sql, err)
		}
	}
	if _, err := postgres.Open(ctx, dsn, postgres.Options{}); err == nil || !strings.Contains(err.Error(), "run kernel store migrate") {
		t.Fatalf("Open of a version-1 database = %v, want a request to migrate", err)
	}
	res, err := postgres.Migrate(ctx, dsn, postgres.Options{})
	if err != nil || res.From != 1 || res.To != postgres.SchemaVersion() {
		t.Fatalf("Migrate = %+v, %v", res, err)
	}
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, err := s.AppendEvents(ctx, "old", 0, []kernel.StoredEvent{{Type: "c", Data: []byte(`{}`)}})
	if err != nil || first != 3 {
		t.Fatalf("the first append after the upgrade = %d, %v; want 3", first, err)
	}
	evs, err := s.ReadEvents(ctx, "old", 0, 10)
	if err != nil || len(evs) != 3 || evs[0].Type != "a" || evs[2].Type != "c" {
		t.Fatalf("the log after the upgrade: %+v, %v", evs, err)
	}
}
