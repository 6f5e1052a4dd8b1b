package policy_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/policy"
)

// TestReplay records a session with no policy (everything allowed), then
// replays it under coding.yaml: the destructive command and the write
// outside src/ would change, the rest would not.
func TestReplay(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	h := newHarness(t, ws, nil, kernel.Config{},
		kerneltest.Calls("read_file", map[string]any{"path": "Makefile"}, "search", map[string]any{"pattern": "clean"}),
		kerneltest.Calls("run_command", map[string]any{"argv": []string{"rm", "-rf", "build"}}),
		kerneltest.Calls("write_file", map[string]any{"path": "README.md", "content": "cleaned"}),
		kerneltest.Text("done"),
		// Second prompt: a question, then a write the new policy would not
		// even offer.
		kerneltest.Calls("write_file", map[string]any{"path": "src/x.go", "content": "x"}),
		kerneltest.Text("ok"),
	)
	res, err := h.k.Run(ctx, "", "clean the build and update the README")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.k.Run(ctx, res.SessionID, "what is in x.go?"); err != nil {
		t.Fatal(err)
	}
	sess, err := h.store.Load(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	p := loadExample(t, "coding.yaml", ws, policy.Options{})
	rep, err := policy.Replay(ctx, p, sess, ws.reg.Specs())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		tool       string
		was, now   kernel.Effect
		notOffered bool
		changed    bool
	}
	want := []row{
		{"read_file", "allow", "allow", false, false},
		{"search", "allow", "allow", false, false},
		{"run_command", "allow", "deny", false, true},
		{"write_file", "allow", "ask", false, true},
		{"write_file", "allow", "deny", true, true},
	}
	if len(rep.Calls) != len(want) || rep.Changed != 3 {
		t.Fatalf("%d calls, %d changed", len(rep.Calls), rep.Changed)
	}
	for i, w := range want {
		c := rep.Calls[i]
		if c.Tool != w.tool || c.Was != w.was || c.Now != w.now || c.NotOffered != w.notOffered || c.Changed != w.changed {
			t.Errorf("call %d = %+v, want %+v", i, c, w)
		}
	}
	if rep.Calls[4].Run != 2 || rep.Calls[2].Turn != 2 {
		t.Errorf("turn/round numbering: %+v %+v", rep.Calls[2], rep.Calls[4])
	}
	rep.Session = "SESSION"
	var out bytes.Buffer
	if err := rep.Format(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/replay.golden", out.Bytes())
}

// TestReplayRecordedVerdicts replays a session recorded under coding.yaml
// itself (a denial and a pending approval) under the same policy: nothing
// changes, and the recorded verdicts are read back correctly.
func TestReplayRecordedVerdicts(t *testing.T) {
	ctx := context.Background()
	ws := newWorkspace(t)
	p := loadExample(t, "coding.yaml", ws, policy.Options{})
	h := newHarness(t, ws, p, kernel.Config{},
		kerneltest.Calls("run_command", map[string]any{"argv": []string{"git", "push", "--force"}}),
		kerneltest.Calls("edit_file", map[string]any{"path": "go.mod", "old": "a", "new": "b"}),
	)
	res, err := h.k.Run(ctx, "", "fix go.mod and push")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.store.Load(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := policy.Replay(ctx, p, sess, ws.reg.Specs())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Calls) != 2 || rep.Changed != 0 ||
		rep.Calls[0].Was != kernel.EffectDeny || rep.Calls[0].WasDetail != "denied" ||
		rep.Calls[1].Was != kernel.EffectAsk || rep.Calls[1].WasDetail != "awaiting approval" {
		t.Fatalf("replay = %+v", rep.Calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := policy.Replay(cctx, p, sess, nil); err == nil {
		t.Fatal("a cancelled replay succeeded")
	}
}
