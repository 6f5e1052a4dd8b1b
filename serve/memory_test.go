package serve_test

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	mem "github.com/agentkernel/agentkernel/memory"
)

// memoryIndex is the index a rig's memory search reads.
type memoryIndex = mem.Index

// TestMemorySearchOwnerIsolation: GET /v1/memory/search shows a key the
// chunks of its owner's sessions only. Bob's key (an admin, another owner)
// never gets a chunk of Alice's, by query in owner scope nor by naming her
// session (404, as for any session of another owner); Alice finds hers in
// both scopes. On both stores: PostgreSQL's memory index, and bleve's
// beside the Badger store.
func TestMemorySearchOwnerIsolation(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		testMemorySearchOwnerIsolation(t, rigOpts{pg: pgtest.Shared(t).Migrated(t), replica: "solo", memory: true})
	})
	t.Run("badger", func(t *testing.T) {
		testMemorySearchOwnerIsolation(t, rigOpts{badger: filepath.Join(t.TempDir(), "store"), memory: true})
	})
}

func testMemorySearchOwnerIsolation(t *testing.T, o rigOpts) {
	r := newRig(t, o)
	ctx := context.Background()
	aliceSID, bobSID := r.newSession(r.alice), r.newSession(r.bob)
	owner := func(sid string) string {
		s, err := r.store.Load(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		return s.Meta.Labels["serve.owner"]
	}
	aliceOwner, bobOwner := owner(aliceSID), owner(bobSID)
	if aliceOwner == "" || aliceOwner == bobOwner {
		t.Fatalf("owners %q and %q: the test needs two", aliceOwner, bobOwner)
	}
	chunk := func(sid, owner string, seq uint64, text string) mem.Chunk {
		return mem.Chunk{ID: mem.ChunkID(sid, seq, 0), SessionID: sid, Owner: owner, Seq: seq, Role: "user", Time: time.Now(), Text: text}
	}
	if err := r.memory.Add(ctx, mem.Batch{Chunks: []mem.Chunk{
		chunk(aliceSID, aliceOwner, 1, "the vault combination is 4471, written on the amber card"),
		chunk(aliceSID, aliceOwner, 2, "alice keeps the amber card in the greenhouse"),
		chunk(bobSID, bobOwner, 1, "bob's vault holds the deploy runbook"),
	}}); err != nil {
		t.Fatal(err)
	}
	search := func(key string, status int, params ...string) []map[string]any {
		t.Helper()
		v := url.Values{}
		for i := 0; i+1 < len(params); i += 2 {
			v.Set(params[i], params[i+1])
		}
		p := r.do("GET", "/v1/memory/search?"+v.Encode(), key, nil)
		if p.status != status {
			t.Fatalf("search %v = %d %s, want %d", v, p.status, p.body, status)
		}
		if status != 200 {
			return nil
		}
		var out []map[string]any
		for _, h := range p.json(t)["hits"].([]any) {
			out = append(out, h.(map[string]any))
		}
		return out
	}
	sessionsOf := func(hits []map[string]any) string {
		var s []string
		for _, h := range hits {
			s = append(s, h["session"].(string))
		}
		return strings.Join(s, ",")
	}

	// Alice finds her chunks, with provenance, in both scopes.
	hits := search(r.alice, 200, "q", "vault combination amber", "session", aliceSID)
	if len(hits) != 2 || hits[0]["seq"].(float64) != 1 || !strings.Contains(hits[0]["text"].(string), "4471") || hits[0]["role"] != "user" {
		t.Fatalf("alice, session scope: %v", hits)
	}
	if hits := search(r.alice, 200, "q", "vault", "scope", "owner"); sessionsOf(hits) != aliceSID {
		t.Fatalf("alice, owner scope: hits in %q, want only %s", sessionsOf(hits), aliceSID)
	}
	// Bob's query that matches Alice's chunks best gets only his own.
	if hits := search(r.bob, 200, "q", "vault combination 4471 amber card greenhouse", "scope", "owner"); sessionsOf(hits) != bobSID {
		t.Fatalf("bob, owner scope: hits in %q, want only %s", sessionsOf(hits), bobSID)
	}
	// The reader key (read scope, a third owner) gets nothing.
	if hits := search(r.reader, 200, "q", "vault amber", "scope", "owner"); len(hits) != 0 {
		t.Fatalf("reader, owner scope: %v", hits)
	}
	// Naming Alice's session: not found, for Bob and the reader.
	search(r.bob, 404, "q", "vault", "session", aliceSID)
	search(r.reader, 404, "q", "vault", "scope", "session", "session", aliceSID)
	// Bad requests name the parameter.
	search(r.alice, 400, "q", "vault")
	search(r.alice, 400, "q", " ", "scope", "owner")
	search(r.alice, 400, "q", "vault", "scope", "workspace")
	search(r.alice, 400, "q", "vault", "scope", "owner", "session", aliceSID)
	search(r.alice, 400, "q", "vault", "scope", "owner", "limit", "0")
	// CJK and emoji queries do not fail.
	search(r.alice, 200, "q", "東京 🎉", "scope", "owner")
}

// TestMemorySearchNotConfigured: a server without memory answers
// not_implemented, naming it.
func TestMemorySearchNotConfigured(t *testing.T) {
	r := newRig(t, rigOpts{})
	p := r.do("GET", "/v1/memory/search?scope=owner&q=vault", r.alice, nil)
	if p.status != 501 || !strings.Contains(string(p.body), "memory is not configured") {
		t.Fatalf("= %d %s, want 501 naming memory", p.status, p.body)
	}
}
