package kernel_test

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// TestFirstRoomFollowsRuns: a new session's history gets room for as many
// messages as the last new session's run wrote (at least: it shrinks by
// one a run), so a kernel whose runs write 4 messages allocates 4, one
// whose runs write 10 allocates 10 rather than 8 and then 16.
func TestFirstRoomFollowsRuns(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		system string
		sys    int
	}{{"no system prompt", "", 0}, {"system prompt", "be brief", 1}} {
		t.Run(c.name, func(t *testing.T) {
			prov := &benchProvider{turns: 2, calls: 1}
			reg := kernel.NewRegistry()
			if err := reg.Register(kernel.NewTool(kernel.ToolSpec{Name: "read_file", Tier: kernel.TierReadOnly}, handTool)); err != nil {
				t.Fatal(err)
			}
			k, err := kernel.New(kernel.Config{Provider: prov, Store: memory.New(), Tools: reg, Model: "m", MaxTurns: 16, SystemPrompt: c.system})
			if err != nil {
				t.Fatal(err)
			}
			if got := k.FirstRoom(); got != 8 {
				t.Fatalf("room before any run = %d, want 8", got)
			}
			run := func(turns, calls int) {
				t.Helper()
				prov.turns, prov.calls = turns, calls
				res, err := k.Run(ctx, "", "what is in the workspace?")
				if err != nil || res.StopReason != kernel.StopCompleted {
					t.Fatal(res, err)
				}
			}
			run(2, 1) // prompt, call, result, answer
			if got, want := k.FirstRoom(), 4+c.sys; got != want {
				t.Fatalf("room after a 1-call run = %d, want %d", got, want)
			}
			run(4, 2) // prompt, 3×(call + 2 results), answer
			if got, want := k.FirstRoom(), 11+c.sys; got != want {
				t.Fatalf("room after a 3-round run = %d, want %d", got, want)
			}
			run(1, 0) // prompt, answer: the room shrinks by one
			if got, want := k.FirstRoom(), 10+c.sys; got != want {
				t.Fatalf("room after a short run = %d, want %d", got, want)
			}
			run(16, 1) // 31 messages, and the system message: capped
			if got := k.FirstRoom(); got != 32 {
				t.Fatalf("room after a long run = %d, want 32", got)
			}
		})
	}
}

// TestLongerRunThanItsRoom: a run that writes more messages than its
// room (sized by a shorter run before it) stores and returns every
// message, as a run past the old fixed room did, and the store's copy of
// the short run is untouched.
func TestLongerRunThanItsRoom(t *testing.T) {
	ctx := context.Background()
	prov := &benchProvider{turns: 2, calls: 1}
	reg := kernel.NewRegistry()
	if err := reg.Register(kernel.NewTool(kernel.ToolSpec{Name: "read_file", Tier: kernel.TierReadOnly}, handTool)); err != nil {
		t.Fatal(err)
	}
	store := memory.New()
	k, err := kernel.New(kernel.Config{Provider: prov, Store: store, Tools: reg, Model: "m", MaxTurns: 16})
	if err != nil {
		t.Fatal(err)
	}
	short, err := k.Run(ctx, "", "first")
	if err != nil {
		t.Fatal(err)
	}
	if got := k.FirstRoom(); got != 4 {
		t.Fatalf("room = %d, want 4", got)
	}
	prov.turns, prov.calls = 5, 3
	long, err := k.Run(ctx, "", "second")
	if err != nil || long.StopReason != kernel.StopCompleted || len(long.Calls) != 12 {
		t.Fatal(long, err)
	}
	s, err := store.Load(ctx, long.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) != 1+4*4+1 {
		t.Fatalf("stored %d messages, want 18", len(s.Messages))
	}
	if s.Messages[0].Content != "second" || s.Messages[len(s.Messages)-1].Content != "It is a Go program." {
		t.Fatalf("first/last stored = %q/%q", s.Messages[0].Content, s.Messages[len(s.Messages)-1].Content)
	}
	for i, m := range s.Messages {
		if m.Seq != uint64(i+1) {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
	}
	s0, err := store.Load(ctx, short.SessionID)
	if err != nil || len(s0.Messages) != 4 || s0.Messages[0].Content != "first" {
		t.Fatalf("short session = %+v, %v", s0, err)
	}
}
