package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApproveShowsToolPreview: the run's "approval required" and `kernel
// approve` show what write_file itself would do — the diff of the new
// file, exactly as diff -u labels it, with the content shown once — and,
// when the workspace changed so that the tool would refuse the call, the
// tool's own refusal, which is then what the approved call does.
func TestApproveShowsToolPreview(t *testing.T) {
	conf, ws, store, id, errOut := approvalSetup(t, "remember the milk\nand the bread\n")
	for _, want := range []string{"what it would do: create NOTES.md (32 B)", "NOTES.md: a new file",
		"--- /dev/null\n", "+++ b/NOTES.md\n", "@@ -0,0 +1,2 @@\n", "+remember the milk\n", "content: (32 bytes: shown as the diff below)"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("approval required lacks %q:\n%s", want, errOut)
		}
	}
	card := errOut[strings.Index(errOut, "approval required:"):]
	if n := strings.Count(card, "remember the milk"); n != 1 {
		t.Fatalf("the approval shows the content %d times:\n%s", n, card)
	}
	// A directory where the file would go: the tool would refuse.
	if err := os.Mkdir(filepath.Join(ws, "NOTES.md"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := cli(t, "approve", "--config", conf, "--store", store, id)
	want := `the tool would refuse this call: write "NOTES.md": it is a directory`
	if err == nil || !strings.Contains(errOut, want) || !strings.Contains(errOut, "run this call?") {
		t.Fatalf("approve: %v; want %q in\n%s", err, want, errOut)
	}
	out, errOut, err := cli(t, "approve", "--config", conf, "--store", store, "--yes", id)
	if err != nil {
		t.Fatalf("approve --yes: %v\n%s", err, errOut)
	}
	show, _, _ := cli(t, "sessions", "show", "--store", store, "--full", id)
	if !strings.Contains(show, `write "NOTES.md": it is a directory`) {
		t.Fatalf("the approved call did not fail as previewed:\n%s\n%s", out, show)
	}
}

// TestMCPServeElicitationShowsPreview: the client's user, asked through
// elicitation, reads what write_file itself would do: the diff of the
// file, or the tool's refusal ("aa" matches twice in "aaa").
func TestMCPServeElicitationShowsPreview(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	cfg, _ := mcpSetup(t, "steps: [{text: x}]\n")
	appendFile(t, cfg, "mcp_serve: {approvals: elicitation}\n")
	dir := filepath.Dir(cfg)
	policy := strings.Replace(mcpPolicy, "tests:\n", "  - id: edits-need-approval\n    effect: ask\n    tools: [write_file, edit_file]\n    when: \"true\"\n    message: '\"change a file?\"'\ntests:\n", 1)
	writeFiles(t, dir, map[string]string{"policy.yaml": policy, "ws/plan.txt": "aaa\nold line\n"})
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(string(b), "builtin: {enable: [read_file, write_file]}", "builtin: {enable: [read_file, write_file, edit_file]}", 1)
	writeFiles(t, dir, map[string]string{filepath.Base(cfg): conf})
	var asked []string
	var mu sync.Mutex
	cs, stop := serveStdio(t, cfg, t.TempDir(), &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
	})
	defer stop()
	callText(t, cs, "write_file", map[string]any{"path": "plan.txt", "content": "aaa\nnew line\n"})
	text, isErr := callText(t, cs, "edit_file", map[string]any{"path": "plan.txt", "old": "aa", "new": "b"})
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("elicitations: %q", asked)
	}
	if want := "what it would do: replace plan.txt (13 B → 13 B)\n  --- a/plan.txt\n  +++ b/plan.txt\n  @@ -1,2 +1,2 @@\n   aaa\n  -old line\n  +new line\n"; !strings.Contains(asked[0], want) {
		t.Errorf("the write's elicitation lacks %q:\n%s", want, asked[0])
	}
	if want := "the tool would refuse this call: edit \"plan.txt\": old text occurs 2 times"; !strings.Contains(asked[1], want) || !isErr || !strings.Contains(text, "occurs 2 times") {
		t.Errorf("the edit's elicitation %q, its result (error %v) %q; want %q", asked[1], isErr, text, want)
	}
}
