package memory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/memory"
)

// TestSessionDeleteRemovesChunks: a session deleted from the store loses
// its chunks (the indexer's catch-up finds it gone); another session keeps
// its own.
func TestSessionDeleteRemovesChunks(t *testing.T) {
	r := newRig(t, kernel.Config{}, kerneltest.Text("ok"), kerneltest.Text("ok"))
	ctx := context.Background()
	gone, err := r.k.Run(ctx, "", "the heron nests by the quarry lake")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := r.k.Run(ctx, "", "the heron nests by the quarry lake, too")
	if err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	all := memory.Scope{Kind: memory.ScopeOwner}
	if hs, _ := r.index.SearchText(ctx, all, "heron quarry", 10); len(hs) != 2 {
		t.Fatalf("before delete: %v", ids(hs))
	}
	if err := r.store.(kernel.SessionDeleter).Delete(ctx, gone.SessionID); err != nil {
		t.Fatal(err)
	}
	if err := r.indexer.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	hs, err := r.index.SearchText(ctx, all, "heron quarry", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Chunk.SessionID != kept.SessionID {
		t.Fatalf("after delete: %v, want only %s's chunk", ids(hs), kept.SessionID)
	}
	if m, _ := r.index.Mark(ctx, gone.SessionID); m != 0 {
		t.Fatalf("the deleted session keeps mark %d", m)
	}
}

// TestScrubbedSecretIsNotFindable: a credential a tool printed is redacted
// by the scrubber before the result is stored, and memory indexes what is
// stored: the secret finds nothing, the words around it find the chunk.
func TestScrubbedSecretIsNotFindable(t *testing.T) {
	const secret = "AKIA6PYCDYBK155OXTZ7"
	chain, err := hooks.NewChain(hooks.Config{}, hooks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(kerneltest.EchoTool("echo")); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, kernel.Config{Tools: reg, Hooks: []kernel.Hook{chain.Hook()}},
		kerneltest.Calls("echo", map[string]string{"text": "deployment credentials: aws key " + secret + " for the pelican bucket"}),
		kerneltest.Text("done"))
	ctx := context.Background()
	res, err := r.k.Run(ctx, "", "print the pelican bucket credentials")
	if err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	s := memory.Scope{Kind: memory.ScopeSession, SessionID: res.SessionID}
	hs, err := r.index.SearchText(ctx, s, "pelican bucket deployment credentials", 10)
	if err != nil {
		t.Fatal(err)
	}
	var tool *memory.Chunk
	for i := range hs {
		if hs[i].Chunk.Role == "tool" {
			tool = &hs[i].Chunk
		}
		if strings.Contains(hs[i].Chunk.Text, secret) {
			t.Fatalf("an indexed chunk holds the secret: %q", hs[i].Chunk.Text)
		}
	}
	if tool == nil {
		t.Fatalf("the tool result was not indexed: %v", ids(hs))
	}
	for _, q := range []string{secret, strings.ToLower(secret)} {
		if hs, _ := r.index.SearchText(ctx, s, q, 10); len(hs) != 0 {
			t.Fatalf("the secret %q finds %v", q, ids(hs))
		}
	}
}

// TestExcludeKeepsSourcesOut: a rule excluding tool results of one tool
// keeps them out of the index; the rest is indexed.
func TestExcludeKeepsSourcesOut(t *testing.T) {
	in := memory.NewIndexer(memory.IndexerConfig{Exclude: func(c *memory.Chunk) bool { return c.Tool == "read_file" }})
	cs := memory.ChunksForTest(in, "s1", &kernel.SessionMeta{}, []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "read the secrets"},
		{Seq: 2, Role: kernel.RoleTool, ToolName: "read_file", Content: "password=hunter2"},
		{Seq: 3, Role: kernel.RoleTool, ToolName: "list_dir", Content: "a b c"},
		{Seq: 4, Role: kernel.RoleSystem, Content: memory.Header + "\n- [session x message 1, user, t] y"},
		{Seq: 5, Role: kernel.RoleAssistant, Failed: "model down"},
	})
	var got []string
	for _, c := range cs {
		got = append(got, c.ID)
	}
	if strings.Join(got, " ") != "s1/1/0 s1/3/0" {
		t.Fatalf("indexed %v, want the prompt and list_dir's result only", got)
	}
}
