package serve_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	mem "github.com/agentkernel/agentkernel/memory"
)

// memoryToolScript searches memory twice, in owner and in workspace
// scope, with the words of Alice's chunks, then answers.
const memoryToolScript = `
turns:
  - tool_calls:
      - name: memory_search
        args: {query: "vault combination 4471 amber card greenhouse", scope: owner}
      - name: memory_search
        args: {query: "vault combination 4471 amber card greenhouse", scope: workspace}
  - text: "Searched."
`

// TestMemorySearchToolOwnerIsolation: the memory_search tool in kernel
// serve takes the owner from the session the kernel runs (the key's,
// label serve.owner), never from the model: Bob's key, running the same
// script as Alice in the same workspace, gets only his own chunk in owner
// and in workspace scope, while Alice's run finds hers. On both stores.
func TestMemorySearchToolOwnerIsolation(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		testMemorySearchTool(t, rigOpts{pg: pgtest.Shared(t).Migrated(t), replica: "solo", memory: true})
	})
	t.Run("badger", func(t *testing.T) {
		testMemorySearchTool(t, rigOpts{badger: filepath.Join(t.TempDir(), "store"), memory: true})
	})
}

func testMemorySearchTool(t *testing.T, o rigOpts) {
	var ix mem.Index // set once the rig has opened it, before any run
	ws := t.TempDir()
	tool, err := mem.NewSearchTool(mem.SearchToolConfig{
		Searcher:  func() mem.Searcher { return &mem.Retriever{Index: ix} },
		Scope:     mem.ScopeOwner,
		Workspace: ws,
	})
	if err != nil {
		t.Fatal(err)
	}
	o.tools, o.script, o.ws = []kernel.Tool{tool}, memoryToolScript, ws
	r := newRig(t, o)
	ix = r.memory
	ctx := context.Background()
	aliceOld, aliceSID, bobSID := r.newSession(r.alice), r.newSession(r.alice), r.newSession(r.bob)
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
		return mem.Chunk{ID: mem.ChunkID(sid, seq, 0), SessionID: sid, Owner: owner, Workspace: ws, Seq: seq, Role: "user", Time: time.Now(), Text: text}
	}
	if err := ix.Add(ctx, mem.Batch{Chunks: []mem.Chunk{
		chunk(aliceOld, aliceOwner, 1, "the vault combination is 4471, written on the amber card"),
		chunk(aliceOld, aliceOwner, 2, "alice keeps the amber card in the greenhouse"),
		chunk("bob-old", bobOwner, 1, "bob's vault holds the deploy runbook"),
	}}); err != nil {
		t.Fatal(err)
	}
	results := func(key, sid string) []kernel.Message {
		t.Helper()
		r.must(202, "POST", "/v1/sessions/"+sid+"/runs", key, map[string]any{"prompt": "what do you remember?"})
		r.waitStatus(key, sid, "idle")
		s, err := r.store.Load(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		var out []kernel.Message
		for _, m := range s.Messages {
			if m.Role == kernel.RoleTool {
				out = append(out, m)
			}
		}
		if len(out) != 2 {
			t.Fatalf("session %s: %d tool results, want 2", sid, len(out))
		}
		return out
	}
	for _, m := range results(r.alice, aliceSID) {
		if m.IsError || !strings.Contains(m.Content, "4471") || !strings.Contains(m.Content, "[session "+aliceOld+" message 1, user, ") {
			t.Fatalf("alice's memory_search (%s): %q, want her chunk with its provenance", m.ToolCallID, m.Content)
		}
	}
	for _, m := range results(r.bob, bobSID) {
		hits := m.Content[strings.Index(m.Content, "\n")+1:] // the first line repeats the query
		if m.IsError || strings.Contains(hits, "4471") || strings.Contains(hits, aliceOld) {
			t.Fatalf("bob's memory_search (%s) reached alice's chunks: %q", m.ToolCallID, m.Content)
		}
		for _, line := range strings.Split(m.Content, "\n")[1:] {
			if !strings.HasPrefix(line, "- [session bob-old ") && !strings.HasPrefix(line, "- [session "+bobSID+" ") {
				t.Fatalf("bob's memory_search (%s): a hit outside his sessions: %q", m.ToolCallID, line)
			}
		}
		if !strings.Contains(m.Content, "bob's vault") {
			t.Fatalf("bob's memory_search (%s): %q, want his own chunk", m.ToolCallID, m.Content)
		}
	}
}
