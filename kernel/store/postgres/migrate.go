package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The schema's migrations, applied in order by Migrate: migrations/NNNN_name.sql.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order.
func migrations() []migration {
	ents, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	var out []migration
	for _, e := range ents {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("postgres: migration file " + e.Name() + " is not NNNN_name.sql")
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			panic(fmt.Sprintf("postgres: migration %d is numbered %d", i+1, m.version))
		}
	}
	return out
}

// SchemaVersion is the schema version this package reads and writes: the
// number of its migrations.
func SchemaVersion() int { return len(migrations()) }

// The tables the store reads and writes (the privileges Open checks).
var tables = []string{"ak_sessions", "ak_messages", "ak_event_seq", "ak_events", "ak_queue", "ak_runs", "ak_memory_chunks", "ak_memory_marks", "ak_memory_meta", "ak_segments"}

// migrateLock is the advisory lock key that serialises migrations (two
// replicas started at once migrate one after the other).
const migrateLock = 0x616b6d6967726174 // "akmigrat"

// MigrateResult is what Migrate did.
type MigrateResult struct {
	// From and To are the schema versions before and after.
	From, To int
	// Applied names the migrations applied, in order.
	Applied []string
}

// Migrate brings the database dsn names to SchemaVersion, applying the
// missing migrations in one transaction under an advisory lock: all or
// none, and one process at a time. A database whose schema is newer than
// this package knows is an error (ErrSchema) and is left alone.
func Migrate(ctx context.Context, dsn string, opts Options) (MigrateResult, error) {
	cfg, err := parseDSN(dsn, opts)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("migrate session database: %w", err)
	}
	where := describe(cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return MigrateResult{}, connectError(where, cfg.ConnConfig.User, cfg.ConnConfig.Database, cfg.ConnConfig.Password, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var res MigrateResult
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS ak_schema (
			version integer PRIMARY KEY,
			name    text NOT NULL,
			applied timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ak_schema`).Scan(&res.From); err != nil {
			return err
		}
		all := migrations()
		res.To = res.From
		if res.From > len(all) {
			return fmt.Errorf("%w: the schema is version %d, newer than this kernel knows (%d): upgrade the kernel", ErrSchema, res.From, len(all))
		}
		for _, m := range all[res.From:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO ak_schema (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
			res.Applied = append(res.Applied, fmt.Sprintf("%04d_%s", m.version, m.name))
			res.To = m.version
		}
		return nil
	})
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			return MigrateResult{}, fmt.Errorf("migrate session database %s: user %q may not change the schema (%s): run kernel store migrate as the database's owner, or GRANT CREATE ON SCHEMA public TO %s", where, cfg.ConnConfig.User, pe.Message, cfg.ConnConfig.User)
		}
		if errors.Is(err, ErrSchema) {
			return res, fmt.Errorf("migrate session database %s: %w", where, err)
		}
		if unreachable(err) {
			return MigrateResult{}, fmt.Errorf("migrate session database %s: %w: %s", where, ErrUnavailable, reason(err))
		}
		return MigrateResult{}, fmt.Errorf("migrate session database %s: %w", where, err)
	}
	return res, nil
}

// checkSchema refuses a database whose schema is not SchemaVersion, or
// whose tables the user may not read and write.
func (s *Store) checkSchema(ctx context.Context) error {
	want := SchemaVersion()
	var present bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('ak_schema') IS NOT NULL`).Scan(&present); err != nil {
		return s.classify("open session database "+s.where, err)
	}
	if !present {
		return fmt.Errorf("open session database %s: %w: it has no agentkernel tables yet: run kernel store migrate", s.where, ErrSchema)
	}
	rows, err := s.pool.Query(ctx, `SELECT t FROM unnest($1::text[]) AS t
WHERE to_regclass(t) IS NOT NULL AND NOT has_table_privilege(t, CASE WHEN t = 'ak_schema' THEN 'SELECT' ELSE 'SELECT, INSERT, UPDATE, DELETE' END)`,
		append([]string{"ak_schema"}, tables...))
	if err != nil {
		return s.classify("open session database "+s.where, err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return s.classify("open session database "+s.where, err)
	}
	if len(missing) > 0 {
		list := strings.Join(missing, ", ")
		return fmt.Errorf("open session database %s: the user may not read and write %s: GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO the user (SELECT is enough on ak_schema)", s.where, list, list)
	}
	var have int
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ak_schema`).Scan(&have); err != nil {
		return s.classify("open session database "+s.where, err)
	}
	switch {
	case have < want:
		return fmt.Errorf("open session database %s: %w: the schema is version %d, older than this kernel needs (%d): run kernel store migrate", s.where, ErrSchema, have, want)
	case have > want:
		return fmt.Errorf("open session database %s: %w: the schema is version %d, newer than this kernel knows (%d): upgrade the kernel", s.where, ErrSchema, have, want)
	}
	return nil
}
