package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// demoCopy sets up the demo as examples/demo/run.sh does (a copy of the
// workspace with its two commits, the git plugin pinned) and returns the
// --config flags of the demo.
func demoCopy(t *testing.T) []string {
	t.Helper()
	root := artifacts(t, "bin/plugins/git", "bin/plugins/git.sha256", "wasm-tools/jq/jq.wasm", "wasm-tools/js/js.wasm")
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if out, err := exec.Command("cp", "-R", filepath.Join(root, "examples/demo/workspace"), ws).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	git := func(date string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada Example", "GIT_AUTHOR_EMAIL=ada@example.com",
			"GIT_COMMITTER_NAME=Ada Example", "GIT_COMMITTER_EMAIL=ada@example.com", "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("", "init", "-q")
	git("", "add", "README.md", "go.mod", "cmd", "internal")
	git("2026-11-02T10:00:00Z", "commit", "-q", "-m", "linkcheck: report broken relative links")
	git("", "add", "-A")
	git("2026-11-20T16:30:00Z", "commit", "-q", "-m", "docs: add the user guide and the nightly report job")
	sum, err := os.ReadFile(filepath.Join(root, "bin/plugins/git.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	layer := "workspace: workspace\ntools:\n  plugins:\n    - name: git\n      path: " + filepath.Join(root, "bin/plugins/git") +
		"\n      sha256: " + strings.Fields(string(sum))[0] + "\n      dir: workspace\n      env: [PATH, HOME]\n      timeout: 30s\n" +
		"      sandbox: {fs: [{path: /usr, mode: ro}, {path: workspace, mode: ro}]}\n"
	if err := os.WriteFile(filepath.Join(dir, "demo.yaml"), []byte(layer), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--config", filepath.Join(root, "examples/demo/kernel.yaml"), "--config", filepath.Join(dir, "demo.yaml")}
}

// storedRun is what a stored session says about its run: the tools called
// with their arguments and results, in order, and the final answer.
type storedRun struct {
	Calls   []string
	Results []string
	Answer  string
}

// readRun also returns how many answers came as text-protocol answers.
func readRun(t *testing.T, export string) (storedRun, int) {
	t.Helper()
	var r storedRun
	raw := 0
	for _, line := range strings.Split(strings.TrimSpace(export), "\n") {
		var m struct {
			Type      string                             `json:"type"`
			Role      string                             `json:"role"`
			Content   string                             `json:"content"`
			Protocol  struct{ Raw string }               `json:"protocol"`
			ToolName  string                             `json:"tool_name"`
			IsError   bool                               `json:"is_error"`
			ToolCalls []struct{ Name, Arguments string } `json:"tool_calls"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		switch m.Role {
		case "assistant":
			if m.Protocol.Raw != "" {
				raw++
			}
			for _, c := range m.ToolCalls {
				var args any
				if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
					t.Fatalf("arguments %q: %v", c.Arguments, err)
				}
				b, _ := json.Marshal(args) // the same call, however it was spaced
				r.Calls = append(r.Calls, c.Name+" "+string(b))
			}
			if len(m.ToolCalls) == 0 {
				r.Answer = m.Content
			}
		case "tool":
			if m.IsError {
				m.Content = "error: " + m.Content
			}
			r.Results = append(r.Results, m.ToolName+": "+m.Content)
		}
	}
	return r, raw
}

// TestDemoTextProtocol runs the demo's first story with the tools offered
// natively and then as text, in each format, against the scripted model
// writing its calls in the protocol: the same calls run and return the
// same results, and the answer is the same.
func TestDemoTextProtocol(t *testing.T) {
	cfg := demoCopy(t)
	const prompt = "What does this project do, what changed recently, and how is the nightly report deployed?"
	runs := map[string]storedRun{}
	for _, mode := range [][]string{nil, {"--tool-protocol", "text"}, {"--tool-protocol", "text", "--tool-format", "json"}} {
		name := strings.Join(mode, " ")
		store := t.TempDir()
		args := append(append(append([]string{"run"}, cfg...), mode...), "--store", store, prompt)
		out, errOut, err := cli(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, errOut)
		}
		if strings.Contains(out+errOut, "<tool_call>") || strings.Contains(out+errOut, `"parameters"`) {
			t.Errorf("%s: the protocol shows:\n%s\n%s", name, out, errOut)
		}
		if !strings.Contains(out, "reached me as `[REDACTED]`") {
			t.Errorf("%s: stdout:\n%s", name, out)
		}
		r, raw := readRun(t, exportSession(t, store))
		if want := map[bool]int{false: 0, true: 6}[mode != nil]; raw != want {
			t.Errorf("%q: %d answers read as text, want %d", name, raw, want)
		}
		runs[name] = r
	}
	native := runs[""]
	if len(native.Calls) != 7 || len(native.Results) != 7 {
		t.Fatalf("the native run made %d calls: %+v", len(native.Calls), native)
	}
	for name, r := range runs {
		if !reflect.DeepEqual(r, native) {
			t.Errorf("%q differs from the native run:\n%+v\nnative:\n%+v", name, r, native)
		}
	}
}
