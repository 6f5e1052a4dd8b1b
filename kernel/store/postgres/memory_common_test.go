package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

// dbName is the database a pgtest DSN names.
func dbName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// TestMemoryCommonLexemesRankButDoNotSelect: once PostgreSQL has analyzed
// the chunks, a lexeme in CommonShare of them or more ranks the chunks
// the query's rare lexemes select but selects none itself; a query of
// common lexemes only is selected by its rarest. 400 chunks: "ordinary"
// in all, "giraffe" in half, "zebra" in one, "okapi" in two (one of them
// with giraffe).
func TestMemoryCommonLexemesRankButDoNotSelect(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Shared(t)
	dsn := srv.Migrated(t)
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var cs []memory.Chunk
	for i := uint64(1); i <= 400; i++ {
		text := fmt.Sprintf("an ordinary note, number %d", i)
		if i%2 == 0 {
			text += ", a giraffe"
		}
		if i == 7 {
			text += ", a zebra"
		}
		if i == 11 || i == 12 {
			text += ", an okapi"
		}
		cs = append(cs, memorytest.C("s", "ann", i, text))
	}
	if err := s.MemoryIndex().Add(ctx, memory.Batch{Chunks: cs}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Exec(dbName(t, dsn), `ANALYZE ak_memory_chunks`); err != nil {
		t.Fatal(err)
	}
	ix := s.MemoryIndex() // reads the statistics ANALYZE wrote
	owner := memory.Scope{Kind: memory.ScopeOwner, Owner: "ann"}
	seqs := func(q string) []uint64 {
		t.Helper()
		hits, err := ix.SearchText(ctx, owner, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, h := range hits {
			out = append(out, h.Chunk.Seq)
		}
		return out
	}
	// "ordinary" matches every chunk: it does not select, zebra does.
	if got := seqs("an ordinary zebra"); fmt.Sprint(got) != "[7]" {
		t.Errorf(`"an ordinary zebra" found chunks %v, want [7]: the common lexeme selected chunks`, got)
	}
	// Both select (okapi), giraffe ranks: 12 has it, 11 does not.
	if got := seqs("okapi giraffe"); fmt.Sprint(got) != "[12 11]" {
		t.Errorf(`"okapi giraffe" found chunks %v, want [12 11]: the common lexeme did not rank`, got)
	}
	// Common only: the rarest (giraffe, half) selects.
	got := seqs("ordinary giraffe")
	if len(got) != 10 {
		t.Fatalf(`"ordinary giraffe" found %d chunks, want 10`, len(got))
	}
	for _, n := range got {
		if n%2 != 0 {
			t.Errorf(`"ordinary giraffe" found chunk %d, which has no giraffe: the rarest lexeme did not select`, n)
		}
	}
	if got := seqs("ordinary"); len(got) != 10 {
		t.Errorf(`"ordinary" found %d chunks, want 10 (a lone common lexeme selects)`, len(got))
	}
}

// TestMemoryMigration4: a version-3 database (memory's chunks under a GIN
// index with PostgreSQL's default 4 MB pending list) migrates to version
// 4: the index's pending list is bounded to 256 kB, the chunks written
// before are merged and still found, and new chunks are found too.
func TestMemoryMigration4(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	db := dbName(t, dsn)
	stmts := []string{`CREATE TABLE ak_schema (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`}
	for v, name := range []string{"0001_sessions", "0002_fenced_events", "0003_memory"} {
		b, err := os.ReadFile("migrations/" + name + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, string(b), fmt.Sprintf(`INSERT INTO ak_schema (version, name) VALUES (%d, '%s')`, v+1, name[5:]))
	}
	stmts = append(stmts, `INSERT INTO ak_memory_chunks (id, session_id, owner, workspace, seq, part, role, tool, time, body)
		VALUES ('s/1/0', 's', 'ann', '', 1, 0, 'user', '', now(), 'the lighthouse keeper is called Morwenna')`)
	for _, sql := range stmts {
		if err := srv.Exec(db, sql); err != nil {
			t.Fatalf("%.60s: %v", sql, err)
		}
	}
	res, err := postgres.Migrate(ctx, dsn, postgres.Options{})
	if err != nil || res.From != 3 || res.To != postgres.SchemaVersion() {
		t.Fatalf("Migrate = %+v, %v", res, err)
	}
	if err := srv.Exec(db, `DO $$ BEGIN
		IF NOT (SELECT reloptions @> '{gin_pending_list_limit=256}' FROM pg_class WHERE relname = 'ak_memory_chunks_tsv') THEN
			RAISE EXCEPTION 'ak_memory_chunks_tsv options: %', (SELECT reloptions FROM pg_class WHERE relname = 'ak_memory_chunks_tsv');
		END IF; END $$`); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ix := s.MemoryIndex()
	if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{memorytest.C("s", "ann", 2, "the ferry leaves at dawn")}}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"who keeps the lighthouse": "Morwenna", "when does the ferry leave": "dawn"} {
		hits, err := ix.SearchText(ctx, memory.Scope{Kind: memory.ScopeOwner, Owner: "ann"}, q, 5)
		if err != nil || len(hits) != 1 || !strings.Contains(hits[0].Chunk.Text, want) {
			t.Errorf("%q after the migration: %+v, %v", q, hits, err)
		}
	}
}
