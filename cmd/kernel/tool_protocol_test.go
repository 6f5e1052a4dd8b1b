package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/catalog"
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
	t.Parallel() // main_test.go, "Parallel tests"
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
		// The five answers with calls keep their text as written.
		if want := map[bool]int{false: 0, true: 5}[mode != nil]; raw != want {
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

// TestApproveKeepsToolProtocol: a run started with --tool-protocol text
// that stops for an approval continues, under `kernel approve` without the
// flag, with the text protocol: the answer after the approval is read as
// text and its call runs.
func TestApproveKeepsToolProtocol(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	script := `steps:
  - tool_calls:
      - {name: write_file, args: {path: NOTES.md, content: "remember the milk\n"}}
  - match: {role: tool, contains: "NOTES.md"}
    raw: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"NOTES.md\"}}\n</tool_call>"
  - match: {role: tool, contains: "remember the milk"}
    text: "Wrote and checked NOTES.md."
`
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\npolicy: {file: " +
		absPath("../../examples/policies/coding.yaml") + "}\ntools:\n  builtin:\n    enable: [read_file, list_dir, search, write_file, edit_file, run_command]\n"
	for name, body := range map[string]string{"script.yaml": script, "kernel.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	store := t.TempDir()
	conf := filepath.Join(dir, "kernel.yaml")
	_, errOut, err := cli(t, "run", "--config", conf, "--store", store, "--tool-protocol", "text", "write a note")
	if err != nil || !strings.Contains(errOut, "approval required: write_file") {
		t.Fatalf("%v\n%s", err, errOut)
	}
	id := sessionLine.FindStringSubmatch(errOut)[1]
	out, errOut, err := cli(t, "approve", "--store", store, "--yes", id)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "✓ read_file") || !strings.Contains(out, "Wrote and checked NOTES.md.") || strings.Contains(out+errOut, "<tool_call>") {
		t.Fatalf("the approval did not continue with the text protocol:\nstdout %s\nstderr %s", out, errOut)
	}
}

// TestToolProtocolPrecedence: the flag, then model.overrides, then
// model.tool_protocol, then the catalog decide each model's protocol.
func TestToolProtocolPrecedence(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "kernel.yaml")
	body := `model:
  provider: openai
  base_url: http://127.0.0.1:11434/v1
  name: gemma3:4b
  fallbacks: [qwen2.5-coder:7b, llama3.2:3b]
  tool_protocol: native
  overrides:
    llama3.2:3b: {tool_protocol: text}
`
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		want  map[string]kernel.ModelTools
	}{
		// model.tool_protocol: native wins over the catalog's auto for
		// gemma3; the override sets llama3.2, which keeps its catalog format.
		{nil, map[string]kernel.ModelTools{"llama3.2:3b": {Protocol: kernel.ToolProtocolText, Format: "json"}}},
		// The flags win over everything, for every model.
		{[]string{"--tool-protocol", "auto", "--tool-format", "hermes"}, map[string]kernel.ModelTools{
			"gemma3:4b": {Protocol: kernel.ToolProtocolAuto, Format: "hermes"}, "qwen2.5-coder:7b": {Protocol: kernel.ToolProtocolAuto, Format: "hermes"},
			"llama3.2:3b": {Protocol: kernel.ToolProtocolAuto, Format: "hermes"}}},
	} {
		var cf commonFlags
		fs := newFlagSet("run", "", io.Discard)
		cf.register(fs)
		if err := fs.Parse(append([]string{"--config", conf}, tc.flags...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := cf.load()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.toolProtocols(cat); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.flags, got, tc.want)
		}
	}
	// A bad value names the field.
	os.WriteFile(conf, []byte("model:\n  tool_protocol: sometimes\n"), 0o600)
	if _, _, err := cli(t, "tools", "--config", conf); err == nil || !strings.Contains(err.Error(), "model.tool_protocol") {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := cli(t, "run", "--tool-protocol", "sometimes", "hi"); err == nil {
		t.Fatal("--tool-protocol sometimes was accepted")
	}
}

// TestToolProtocolStopCLI: a scripted model that breaks the protocol twice
// gets one correction, then the run stops as tool_protocol (exit status
// 1); the events match their schema and the transcript shows both.
func TestToolProtocolStopCLI(t *testing.T) {
	dir := t.TempDir()
	script := `steps:
  - raw: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"README.md\"}}\n</tool_call>\nThe README says hello."
  - match: {role: user, contains: "Tool protocol error"}
    raw: "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"
`
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	store, events := t.TempDir(), filepath.Join(dir, "events.jsonl")
	_, errOut, err := cli(t, "run", "--script", filepath.Join(dir, "script.yaml"), "--tool-protocol", "text", "--workspace", "../../examples/demo/workspace",
		"--store", store, "--events", events, "read the readme")
	if err == nil || !strings.Contains(err.Error(), "broke the text tool protocol again after 1 correction(s): unknown_tool") {
		t.Fatalf("err = %v\n%s", err, errOut)
	}
	for _, want := range []string{"tool_protocol: the model broke the text tool protocol: prose_after_call", "tool_protocol · the model kept breaking"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	types := validateEvents(t, events)
	if len(types) == 0 || types[len(types)-1] != "run.failed" || !slices.Contains(types, "notice") {
		t.Errorf("events: %v", types)
	}
	out, _, err := cli(t, "sessions", "show", "--store", store, sessionLine.FindStringSubmatch(errOut)[1])
	if err != nil || !strings.Contains(out, "kernel correction (prose_after_call)") || !strings.Contains(out, "assistant (broke the tool protocol; nothing ran)") {
		t.Fatalf("%v\n%s", err, out)
	}
}
