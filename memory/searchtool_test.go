package memory_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/memory"
)

// ownedSession stores an empty session of owner (label serve.owner), as
// kernel serve creates one for a key.
func ownedSession(t *testing.T, st kernel.Store, id, owner string) {
	t.Helper()
	now := time.Now().UTC()
	meta := kernel.SessionMeta{ID: id, Status: kernel.StatusIdle, Created: now, Updated: now,
		Labels: map[string]string{memory.OwnerLabel: owner}}
	if err := st.Commit(context.Background(), id, kernel.Step{Meta: meta}); err != nil {
		t.Fatal(err)
	}
}

// toolResult is the content of the result of call id in session sid.
func toolResult(t *testing.T, st kernel.Store, sid, id string) kernel.Message {
	t.Helper()
	sess, err := st.Load(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sess.Messages {
		if m.Role == kernel.RoleTool && m.ToolCallID == id {
			return m
		}
	}
	t.Fatalf("session %s has no result of call %s", sid, id)
	return kernel.Message{}
}

// TestSearchToolFindsEarlierSession: a scripted model, in a new session,
// calls memory_search with scope owner and gets the fact an earlier
// session of the same owner stated, with its provenance; a session of
// another owner asking the same finds nothing of it, whatever scope it
// asks for; a scope wider than the configured one is refused; and an
// agent whose memory is off is refused.
func TestSearchToolFindsEarlierSession(t *testing.T) {
	const fact = "The vault passphrase of the Orion project is cobalt-harbor-1937."
	var retriever memory.Searcher
	tool, err := memory.NewSearchTool(memory.SearchToolConfig{
		Searcher:  func() memory.Searcher { return retriever },
		Scope:     memory.ScopeOwner,
		Workspace: "/ws",
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	search := func(args string) kerneltest.Reply { return kerneltest.Calls(memory.SearchToolName, args) }
	r := newRig(t, kernel.Config{Tools: reg},
		kerneltest.Text("noted"),                                                                  // alice's first session
		search(`{"query":"Orion vault passphrase","scope":"owner"}`), kerneltest.Text("found it"), // alice's second
		search(`{"query":"Orion vault passphrase","scope":"owner"}`),             // bob, owner scope
		search(`{"query":"Orion vault passphrase","scope":"workspace"}`),         // bob, workspace scope
		search(`{"query":"Orion vault passphrase"}`), kerneltest.Text("nothing"), // bob, default scope
	)
	retriever = &memory.Retriever{Index: r.index}
	ctx := context.Background()
	for id, owner := range map[string]string{"alice-1": "alice", "alice-2": "alice", "bob-1": "bob"} {
		ownedSession(t, r.store, id, owner)
	}
	if _, err := r.k.Run(ctx, "alice-1", fact); err != nil {
		t.Fatal(err)
	}
	r.flush(t)

	if _, err := r.k.Run(ctx, "alice-2", "What is the Orion passphrase?"); err != nil {
		t.Fatal(err)
	}
	got := toolResult(t, r.store, "alice-2", "c1")
	if got.IsError || !strings.Contains(got.Content, "cobalt-harbor-1937") || !strings.Contains(got.Content, "[session alice-1 message 1, user, ") {
		t.Fatalf("alice's search in a new session: %q; want the fact with its provenance (session alice-1 message 1)", got.Content)
	}

	// Bob's sessions carry another owner: no scope reaches alice's chunks.
	if _, err := r.k.Run(ctx, "bob-1", "What is the Orion passphrase?"); err != nil {
		t.Fatal(err)
	}
	sess, err := r.store.Load(ctx, "bob-1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range sess.Messages {
		if m.Role != kernel.RoleTool {
			continue
		}
		n++
		if m.IsError || strings.Contains(m.Content, "cobalt") || strings.Contains(m.Content, "alice") {
			t.Fatalf("bob's search (%s) answered %q: another owner's chunk leaked", m.ToolCallID, m.Content)
		}
		for _, line := range strings.Split(m.Content, "\n")[1:] {
			if !strings.HasPrefix(line, "- [session bob-1 ") {
				t.Fatalf("bob's search (%s) answered a hit outside his session: %q", m.ToolCallID, line)
			}
		}
	}
	if n != 3 {
		t.Fatalf("bob's session has %d tool results, want 3", n)
	}
}

// TestSearchToolScopes: the arguments never widen the scope: a scope
// wider than the configured one (or the agent's) is refused, an agent
// whose memory is off is refused, a call outside a kernel run is refused,
// and the owner comes from the session, never from the arguments.
func TestSearchToolScopes(t *testing.T) {
	var retriever memory.Searcher
	tool, err := memory.NewSearchTool(memory.SearchToolConfig{
		Searcher: func() memory.Searcher { return retriever },
		Scope:    memory.ScopeWorkspace,
		Agents:   memory.AgentScopes{kernel.DefaultAgentName: memory.ScopeSession},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Call(context.Background(), []byte(`{"query":"x"}`)); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Fatalf("a call outside a run: %v, want a refusal naming the missing session", err)
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, kernel.Config{Tools: reg}, kerneltest.Text("ok"),
		kerneltest.Calls(memory.SearchToolName, `{"query":"heron","scope":"owner"}`, memory.SearchToolName, `{"query":"heron","scope":"workspace"}`,
			memory.SearchToolName, `{"query":"heron","owner":"alice"}`, memory.SearchToolName, `{"query":"heron"}`),
		kerneltest.Text("done"))
	retriever = &memory.Retriever{Index: r.index}
	ctx := context.Background()
	ownedSession(t, r.store, "s", "bob")
	if _, err := r.k.Run(ctx, "s", "the heron nests by the quarry lake"); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	if _, err := r.k.Run(ctx, "s", "where does it nest?"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"c1": "wider than this agent's memory scope, session", // wider than memory.scope too
		"c2": "wider than this agent's memory scope, session", // allowed by memory.scope, not by the agent's
		"c3": "owner",                                         // an argument the schema does not know
	} {
		if m := toolResult(t, r.store, "s", id); !m.IsError || !strings.Contains(m.Content, want) {
			t.Fatalf("call %s: %q (error %v), want a refusal saying %q", id, m.Content, m.IsError, want)
		}
	}
	if m := toolResult(t, r.store, "s", "c4"); m.IsError || !strings.HasPrefix(m.Content, "1 hit(s) in scope session") {
		t.Fatalf("default scope: %q, want the agent's session scope and the session's own prompt", m.Content)
	}

	off, err := memory.NewSearchTool(memory.SearchToolConfig{Searcher: func() memory.Searcher { return retriever },
		Agents: memory.AgentScopes{kernel.DefaultAgentName: memory.ScopeOff}})
	if err != nil {
		t.Fatal(err)
	}
	reg2 := kernel.NewRegistry()
	if err := reg2.Register(off); err != nil {
		t.Fatal(err)
	}
	r2 := newRig(t, kernel.Config{Tools: reg2}, kerneltest.Calls(memory.SearchToolName, `{"query":"heron"}`), kerneltest.Text("done"))
	res, err := r2.k.Run(ctx, "", "the heron")
	if err != nil {
		t.Fatal(err)
	}
	if m := toolResult(t, r2.store, res.SessionID, "c1"); !m.IsError || !strings.Contains(m.Content, "memory is off") {
		t.Fatalf("memory off for the agent: %q", m.Content)
	}
}
