package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

// TestMemoryIndexConformance runs memory's conformance suite on the
// PostgreSQL index, on a real server: each test a database of its own,
// reopened through a new store (the reopen test).
func TestMemoryIndexConformance(t *testing.T) {
	memorytest.RunIndexTests(t, func(t *testing.T) memorytest.Opener {
		dsn := pgtest.Shared(t).Migrated(t)
		return func() (memory.Index, error) {
			s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { s.Close() })
			return s.MemoryIndex(), nil
		}
	})
}

// TestMemorySessionDeleteRemovesChunks: deleting a session from the store
// (kernel sessions rm) removes its chunks and mark in the same
// transaction, and only its own; so does gc, for the sessions it removes.
func TestMemorySessionDeleteRemovesChunks(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, postgres.Options{})
	ix := s.MemoryIndex()
	old := time.Now().Add(-48 * time.Hour)
	for _, id := range []string{"gone", "kept", "old"} {
		updated := time.Now()
		if id == "old" {
			updated = old
		}
		msgs := []kernel.Message{{Seq: 1, Role: kernel.RoleUser, Content: "the harbour pilot is named Quillon"}}
		if err := s.Commit(ctx, id, kernel.Step{Messages: msgs, Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Updated: updated}}); err != nil {
			t.Fatal(err)
		}
		if err := ix.Add(ctx, memory.Batch{Chunks: []memory.Chunk{memorytest.C(id, "ann", 1, msgs[0].Content)}, Marks: map[string]uint64{id: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	sessionsWithHits := func() []string {
		hits, err := ix.SearchText(ctx, memory.Scope{Kind: memory.ScopeOwner, Owner: "ann"}, "who is the harbour pilot", 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.Chunk.SessionID)
		}
		slices.Sort(ids)
		return ids
	}
	if got := sessionsWithHits(); !slices.Equal(got, []string{"gone", "kept", "old"}) {
		t.Fatalf("before delete: hits in %v", got)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if removed, err := s.GC(ctx, 24*time.Hour); err != nil || !slices.Equal(removed, []string{"old"}) {
		t.Fatalf("gc removed %v, %v; want [old]", removed, err)
	}
	if got := sessionsWithHits(); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("after delete and gc: hits in %v, want [kept]", got)
	}
	for id, want := range map[string]uint64{"gone": 0, "old": 0, "kept": 1} {
		if mark, err := ix.Mark(ctx, id); err != nil || mark != want {
			t.Errorf("Mark(%s) = %d, %v; want %d", id, mark, err, want)
		}
	}
}

// TestMemoryDeleteRacingIndexing: the trigger removes a session's chunks
// when the session is deleted; what an indexer writes afterwards is
// removed by its sweep (memorytest.DeleteRacingIndexing).
func TestMemoryDeleteRacingIndexing(t *testing.T) {
	s, _ := openStore(t, postgres.Options{})
	memorytest.DeleteRacingIndexing(t, s, s.MemoryIndex())
}
