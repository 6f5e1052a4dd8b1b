package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// commandRule is a hooks config with one command rule.
func commandRule(name string, phase Phase, argv []string, extra string) string {
	return fmt.Sprintf("rules:\n  - name: %s\n    phase: %s\n    command: {argv: %s%s}\n", name, phase, yamlList(argv), extra)
}

func TestCommandHookTimeoutFailsClosed(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The hook starts a child in its sandbox, records that it did, and
	// hangs; the default PATH of sh finds sleep. Its grant lets it write
	// dir.
	hang := shellHook(t, `sleep 60.77 & echo started > "$1"; sleep 60.77`)
	ch := mustChain(t, commandRule("slow", PhaseBefore, []string{hang, pidFile}, ", timeout: 10s, sandbox: {fs: [{path: "+dir+", mode: rw}]}"))
	tool := newTextTool("echo", kernel.TierReadOnly, nil)
	r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
		kerneltest.Calls("echo", map[string]any{"text": "x"}), kerneltest.Text("ok"))
	start := time.Now()
	res := r.run()
	if elapsed := time.Since(start); elapsed > 60*time.Second {
		t.Fatalf("the run took %s; the hook was not killed at its timeout", elapsed)
	}
	if len(tool.calls()) != 0 {
		t.Fatal("the tool ran although its before hook timed out (fail_closed)")
	}
	m := r.toolMessage()
	if !m.IsError || !strings.Contains(m.Content, `hook "slow"`) || !strings.Contains(m.Content, "timed out after 10s") {
		t.Fatalf("model read %q", m.Content)
	}
	if res.Calls[0].Outcome != kernel.OutcomeError {
		t.Fatalf("outcome %s", res.Calls[0].Outcome)
	}
	if !r.hasEvent("hook.failed slow before echo open=false: command timed out") {
		t.Fatalf("events %v", r.hookEvents())
	}
	// The hook's child, in its sandbox, was killed with it.
	b, err := os.ReadFile(pidFile)
	if err != nil || string(b) != "started\n" {
		t.Fatalf("the hook did not record its child: %q %v", b, err)
	}
	for _, pid := range hostProcessesWith("sleep\x0060.77") {
		waitGone(t, pid)
	}
}

// hostProcessesWith lists host pids whose command line contains tag.
func hostProcessesWith(tag string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), tag) {
			out = append(out, pid)
		}
	}
	return out
}

// waitGone waits until pid is dead (gone, or a zombie nobody reaped yet).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if processGone(pid) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d of the hook's group is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func processGone(pid int) bool {
	if runtime.GOOS == "linux" {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// pid (comm) state ...: a zombie is dead.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
			return stat[i+2] == 'Z'
		}
		return false
	}
	return syscall.Kill(pid, 0) != nil
}

// runCommandTool is a stand-in for the built-in run_command (same schema).
func runCommandTool() *kerneltest.Recorder {
	r := kerneltest.NewRecorder("run_command", kernel.TierPrivileged, "exit code 0")
	r.ToolSpec.Schema = json.RawMessage(`{"type":"object","properties":{"argv":{"type":"array","minItems":1,"items":{"type":"string"}},"timeout_seconds":{"type":"integer"}},"required":["argv"],"additionalProperties":false}`)
	r.ToolSpec.Tags = []string{"exec"}
	return r
}

// TestExampleBlockRm runs examples/hooks/block-rm.sh: exit code 2 blocks
// the call and stderr is what the model reads.
func TestExampleBlockRm(t *testing.T) {
	cfg := `
rules:
  - name: no-rm
    phase: before
    match: tool == "run_command"
    command: {argv: [../examples/hooks/block-rm.sh], timeout: 60s}
`
	ch := mustChain(t, cfg)
	tool := runCommandTool()
	r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
		kerneltest.Calls(
			"run_command", map[string]any{"argv": []string{"rm", "-rf", "build"}},
			"run_command", map[string]any{"argv": []string{"sh", "-c", "cd build && rm -rf out"}},
			"run_command", map[string]any{"argv": []string{"ls", "-la", "firmware"}},
		), kerneltest.Text("ok"))
	res := r.run()
	const reason = "rm is not allowed here: move files into ./trash instead, or ask the user to delete them."
	ms := r.toolMessages()
	for i := range 2 {
		if ms[i].Content != `blocked by hook "no-rm": `+reason || res.Calls[i].Outcome != kernel.OutcomeBlocked {
			t.Errorf("call %d: model read %q, outcome %s", i, ms[i].Content, res.Calls[i].Outcome)
		}
	}
	if ms[2].Content != "exit code 0" || res.Calls[2].Outcome != kernel.OutcomeOK {
		t.Errorf("ls: model read %q, outcome %s", ms[2].Content, res.Calls[2].Outcome)
	}
	if calls := tool.Calls(); len(calls) != 1 || !strings.Contains(string(calls[0]), "firmware") {
		t.Fatalf("tool calls %s", calls)
	}
	if !r.hasEvent("hook.blocked no-rm before run_command: " + reason) {
		t.Fatalf("events %v", r.hookEvents())
	}
}

// TestExampleProtectEnvFiles runs examples/hooks/protect-env-files.sh,
// which answers in JSON.
func TestExampleProtectEnvFiles(t *testing.T) {
	cfg := `
rules:
  - name: protect-env-files
    phase: before
    match: tool in ["write_file", "edit_file"]
    command: {argv: [../examples/hooks/protect-env-files.sh]}
`
	ch := mustChain(t, cfg)
	tool := kerneltest.NewRecorder("write_file", kernel.TierSideEffecting, "wrote it")
	r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
		kerneltest.Calls("write_file", map[string]any{"path": "app/.env", "content": "X=1"}, "write_file", map[string]any{"path": "main.go", "content": "x.env"}),
		kerneltest.Text("ok"))
	r.run()
	ms := r.toolMessages()
	if ms[0].Content != `blocked by hook "protect-env-files": .env files hold secrets and are edited by people only.` {
		t.Errorf("model read %q", ms[0].Content)
	}
	if ms[1].Content != "wrote it\n\n[hook protect-env-files] checked by protect-env-files: not an .env file" {
		t.Errorf("model read %q", ms[1].Content)
	}
	if len(tool.Calls()) != 1 {
		t.Fatalf("tool calls %s", tool.Calls())
	}
}

func TestCommandHookEnvAllowlist(t *testing.T) {
	t.Setenv("HOOKTEST_ALLOWED", "yes")
	t.Setenv("HOOKTEST_SECRET", "must-not-leak")
	ch := mustChain(t, commandRule("env", PhaseBefore, helperArgv(t, "env"), ", env: [HOOKTEST_ALLOWED, HOOKTEST_NOT_SET]"))
	tool := newTextTool("echo", kernel.TierReadOnly, nil)
	r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
		kerneltest.Calls("echo", map[string]any{"text": "x"}), kerneltest.Text("ok"))
	r.run()
	if m := r.toolMessage(); m.Content != "ran with x\n\n[hook env] env=HOOKTEST_ALLOWED=yes" {
		t.Fatalf("the hook's environment is not the allowlist: %q", m.Content)
	}
}

// reply is a hook body that prints a reply.
func reply(json string) string { return "printf '%s' " + shellQuote(json) }

// fail is a hook body that prints msg on stderr and exits with code.
func fail(code int, msg string) string {
	return fmt.Sprintf("printf '%%s' %s >&2; exit %d", shellQuote(msg), code)
}

func TestCommandHookReplies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		phase   Phase
		script  string // the hook's sh body
		extra   string
		ran     string // the args the tool ran with, "" for not run
		content string // what the model read
		outcome kernel.Outcome
		event   string
	}{
		{name: "empty reply allows", phase: PhaseBefore, script: "exit 0",
			ran: `{"text":"x"}`, content: "ran with x", outcome: kernel.OutcomeOK},
		{name: "allow", phase: PhaseBefore, script: reply(`{"decision":"allow"}`),
			ran: `{"text":"x"}`, content: "ran with x", outcome: kernel.OutcomeOK},
		{name: "block with reason", phase: PhaseBefore, script: reply(`{"decision":"block","reason":"not today"}`),
			content: `blocked by hook "h": not today`, outcome: kernel.OutcomeBlocked, event: "hook.blocked h before echo: not today"},
		{name: "updated args", phase: PhaseBefore, script: reply(`{"decision":"allow","updated_args":{"text":"y","n":2}}`),
			ran: `{"text":"y","n":2}`, content: "ran with y", outcome: kernel.OutcomeOK, event: "hook.rewrote h before echo: args"},
		{name: "invalid updated args", phase: PhaseBefore, script: reply(`{"decision":"allow","updated_args":{"n":2}}`),
			content: `not run: hook "h" (before) failed: rewritten arguments are invalid`, outcome: kernel.OutcomeError, event: "hook.failed h before echo open=false"},
		{name: "short-circuit", phase: PhaseBefore, script: reply(`{"decision":"allow","updated_result":{"content":"from cache"}}`),
			content: "from cache", outcome: kernel.OutcomeOK, event: "hook.rewrote h before echo: short_circuit"},
		{name: "after replaces the result", phase: PhaseAfter, script: reply(`{"decision":"allow","updated_result":{"content":"replaced"},"additional_context":"see above"}`),
			ran: `{"text":"x"}`, content: "replaced\n\n[hook h] see above", outcome: kernel.OutcomeOK, event: "hook.rewrote h after echo: result"},
		{name: "after updated args is an error", phase: PhaseAfter, script: reply(`{"decision":"allow","updated_args":{"text":"z"}}`),
			ran: `{"text":"x"}`, content: `result withheld: hook "h" (after) failed: updated_args is only allowed in the before phase`, outcome: kernel.OutcomeError},
		{name: "not JSON", phase: PhaseBefore, script: reply(`ok!`),
			content: `not run: hook "h" (before) failed: the reply is not JSON`, outcome: kernel.OutcomeError, event: "hook.failed h before echo open=false: the reply is not JSON"},
		{name: "bad decision", phase: PhaseBefore, script: reply(`{"decision":"maybe"}`),
			content: `not run: hook "h" (before) failed: the reply does not match schemas/hook-output.schema.json: at /decision: value must be one of "allow", "block"`, outcome: kernel.OutcomeError},
		{name: "unknown field", phase: PhaseBefore, script: reply(`{"decision":"allow","updatedArgs":{}}`),
			content: `the reply does not match schemas/hook-output.schema.json: at /: additionalProperties 'updatedArgs' not allowed`, outcome: kernel.OutcomeError},
		{name: "block and rewrite", phase: PhaseBefore, script: reply(`{"decision":"block","updated_args":{"text":"y"}}`),
			content: `at /updated_args: not allowed`, outcome: kernel.OutcomeError},
		{name: "exit 1", phase: PhaseBefore, script: fail(1, "cannot reach the audit log"),
			content: `not run: hook "h" (before) failed: command exit status 1: cannot reach the audit log`, outcome: kernel.OutcomeError},
		{name: "exit 1 fail_open", phase: PhaseBefore, script: fail(1, "cannot reach the audit log"), extra: "fail_open",
			ran: `{"text":"x"}`, content: "ran with x", outcome: kernel.OutcomeOK, event: "hook.failed h before echo open=true: command exit status 1: cannot reach the audit log"},
		{name: "exit 2 without stderr uses the message", phase: PhaseBefore, script: fail(2, ""), extra: "message",
			content: `blocked by hook "h": ask first`, outcome: kernel.OutcomeBlocked},
		{name: "exit 2 after withholds", phase: PhaseAfter, script: fail(2, "leaks PII"),
			ran: `{"text":"x"}`, content: `result withheld by hook "h": leaks PII`, outcome: kernel.OutcomeBlocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fmt.Sprintf("rules:\n  - name: h\n    phase: %s\n    command: {argv: %s}\n", tc.phase, yamlList([]string{shellHook(t, tc.script)}))
			switch tc.extra {
			case "fail_open":
				cfg += "    fail: fail_open\n"
			case "message":
				cfg += "    message: ask first\n"
			}
			ch := mustChain(t, cfg)
			tool := newTextTool("echo", kernel.TierReadOnly, nil)
			r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
				kerneltest.Calls("echo", map[string]any{"text": "x"}), kerneltest.Text("ok"))
			res := r.run()
			calls := tool.calls()
			switch {
			case tc.ran == "" && len(calls) != 0:
				t.Fatalf("the tool ran: %v", calls)
			case tc.ran != "" && (len(calls) != 1 || calls[0] != tc.ran):
				t.Fatalf("the tool ran with %v, want %s", calls, tc.ran)
			}
			if m := r.toolMessage(); !strings.Contains(m.Content, tc.content) {
				t.Fatalf("model read %q, want it to contain %q", m.Content, tc.content)
			}
			if res.Calls[0].Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s", res.Calls[0].Outcome, tc.outcome)
			}
			if tc.event != "" && !r.hasEvent(tc.event) {
				t.Fatalf("no event %q in %v", tc.event, r.hookEvents())
			}
		})
	}
}

// TestCommandHookInput checks the document a command hook reads against
// schemas/hook-input.schema.json in both phases, and that an after hook
// sees the result already scrubbed.
func TestCommandHookInput(t *testing.T) {
	const secret = "ghp_Xb7Qm2Lk9Zp4Rt6Wv8Ny3Hc5Jd1Fs0Ga2Ke"
	cfg := fmt.Sprintf(`
rules:
  - name: in-before
    phase: before
    command: {argv: %[1]s}
  - name: in-after
    phase: after
    command: {argv: %[1]s}
`, yamlList(helperArgv(t, "input")))
	ch := mustChain(t, cfg)
	tool := newTextTool("echo", kernel.TierReadOnly, func(a textArgs) (kernel.Result, error) {
		return kernel.Result{Content: "token=" + secret}, nil
	})
	r := newRig(t, rigConfig{hooks: []kernel.Hook{ch.Hook()}, tools: []kernel.Tool{tool}},
		kerneltest.Calls("echo", map[string]any{"text": "x", "n": 3}), kerneltest.Text("ok"))
	r.run()
	m := r.toolMessage()
	if strings.Contains(m.Content, secret) {
		t.Fatalf("a secret reached the model: %q", m.Content)
	}
	schema, err := inputSchema()
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]Input{}
	for _, part := range strings.Split(m.Content, "\n\n")[1:] {
		name, doc, ok := strings.Cut(strings.TrimPrefix(part, "[hook "), "] ")
		if !ok {
			t.Fatalf("note %q", part)
		}
		inst, err := decodeJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: input is not JSON: %v", name, err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Fatalf("%s: input does not match schemas/hook-input.schema.json: %v\n%s", name, err, doc)
		}
		var in Input
		if err := json.Unmarshal([]byte(doc), &in); err != nil {
			t.Fatal(err)
		}
		docs[name] = in
	}
	b, a := docs["in-before"], docs["in-after"]
	if b.Phase != PhaseBefore || b.Result != nil || b.Tool.Name != "echo" || b.Tool.Tier != "read_only" || string(b.Args) != `{"n":3,"text":"x"}` || b.Turn != 1 || b.CallID != "c1" || b.SessionID == "" {
		t.Fatalf("before input %+v", b)
	}
	if a.Phase != PhaseAfter || a.Result == nil || a.Result.Content != "token="+Redacted || a.Result.IsError {
		t.Fatalf("after input %+v (the after hook must see the scrubbed result)", a)
	}
}
