package kerneltest

import (
	"context"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// RepairResults is the crash-repair scenario: it stores a session as a
// crash left it (a prompt and an assistant message asking for calls, both
// made at round, and no results), runs the session once more with tools
// (the model then answers "ok") and returns the result the kernel's repair
// gave each call, by call id.
func RepairResults(tb testing.TB, tools *kernel.Registry, round time.Time, calls ...kernel.ToolCall) map[string]string {
	tb.Helper()
	return RepairResultsIn(tb, memory.New(), tools, round, calls...)
}

// RepairResultsIn is RepairResults on st, an empty store of any kind: the
// crash-repair scenario is the same on every store.
func RepairResultsIn(tb testing.TB, st kernel.Store, tools *kernel.Registry, round time.Time, calls ...kernel.ToolCall) map[string]string {
	tb.Helper()
	ctx := context.Background()
	err := st.Commit(ctx, "s", kernel.Step{Messages: []kernel.Message{
		{Seq: 1, Role: kernel.RoleUser, Content: "do things", Time: round},
		{Seq: 2, Role: kernel.RoleAssistant, ToolCalls: calls, Time: round},
	}, Meta: kernel.SessionMeta{Status: kernel.StatusRunning, Created: round, Updated: round}})
	if err != nil {
		tb.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Store: st, Tools: tools, Provider: NewProvider(Text("ok"))})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := k.Run(ctx, "s", "go on"); err != nil {
		tb.Fatal(err)
	}
	se, err := st.Load(ctx, "s")
	if err != nil {
		tb.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range se.Messages {
		if m.Role == kernel.RoleTool {
			got[m.ToolCallID] = m.Content
		}
	}
	return got
}
