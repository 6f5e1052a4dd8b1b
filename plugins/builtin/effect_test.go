package builtin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/plugins/builtin"
)

// TestInterruptedWritesReportTheTruth is the interrupted-write scenario:
// a session whose last round of write_file and edit_file calls was cut by
// a crash (calls stored, no results), with some of the writes done. On
// the next run, repair tells each call's real outcome from the files.
func TestInterruptedWritesReportTheTruth(t *testing.T) {
	ws := t.TempDir()
	tools, closer, err := builtin.New(builtin.Config{Root: ws, Enable: []string{builtin.NameWriteFile, builtin.NameEditFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	reg := kernel.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	round := now.Add(-time.Minute) // when the round started
	write := func(name, content string, mod time.Time) {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	write("done.txt", "new text\n", now)                     // the write completed
	write("old.txt", "from before\n", round.Add(-time.Hour)) // not touched: did not run
	write("other.txt", "someone else\n", now)                // changed since, not by it
	write("edited.go", "func a() { return 2 }\n", now)       // the edit completed
	write("unedited.go", "func b() { return 1 }\n", round.Add(-time.Hour))
	args := func(v map[string]string) string { b, _ := json.Marshal(v); return string(b) }
	calls := []kernel.ToolCall{
		{ID: "c1", Name: builtin.NameWriteFile, Arguments: args(map[string]string{"path": "done.txt", "content": "new text\n"})},
		{ID: "c2", Name: builtin.NameWriteFile, Arguments: args(map[string]string{"path": "missing.txt", "content": "x"})},
		{ID: "c3", Name: builtin.NameWriteFile, Arguments: args(map[string]string{"path": "old.txt", "content": "replacement\n"})},
		{ID: "c4", Name: builtin.NameWriteFile, Arguments: args(map[string]string{"path": "other.txt", "content": "mine\n"})},
		{ID: "c5", Name: builtin.NameEditFile, Arguments: args(map[string]string{"path": "edited.go", "old": "return 1", "new": "return 2"})},
		{ID: "c6", Name: builtin.NameEditFile, Arguments: args(map[string]string{"path": "unedited.go", "old": "return 1", "new": "return 3"})},
	}
	got := kerneltest.RepairResults(t, reg, round, calls...)
	want := map[string]string{
		"c1": kernel.InterruptedCompleted, "c2": kernel.InterruptedNotRun, "c3": kernel.InterruptedNotRun,
		"c4": kernel.Interrupted, "c5": kernel.InterruptedCompleted, "c6": kernel.InterruptedNotRun,
	}
	for id, prefix := range want {
		if !strings.HasPrefix(got[id], prefix) {
			t.Errorf("call %s: result %q, want it to start with %q", id, got[id], prefix)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "old.txt")); string(b) != "from before\n" {
		t.Errorf("the check wrote to old.txt: %q", b)
	}
}
