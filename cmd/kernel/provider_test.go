package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

func openaiArgs(t *testing.T, srv *openaitest.Server, extra ...string) []string {
	t.Helper()
	args := []string{"--provider", "openai", "--base-url", srv.URL(), "--api-key-env", "AGENTKERNEL_TEST_UNSET_KEY",
		"--model", "gpt-test", "--workspace", "../../examples/demo/workspace", "--store", t.TempDir()}
	return append(args, extra...)
}

// TestRunRetryNotice: a 429 with Retry-After is waited out and shown as one
// line; the answer follows.
func TestRunRetryNotice(t *testing.T) {
	srv := openaitest.NewServer(t,
		openaitest.Step{Status: 429, Header: http.Header{"Retry-After": {"1"}}},
		openaitest.Text("Here after the wait."))
	args := append([]string{"run"}, openaiArgs(t, srv, "hi")...)
	out, errOut, err := cli(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(out, "Here after the wait.") || !strings.Contains(errOut, "model busy, retrying in 1.0s (429)") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// TestRunEmptyResponse: two empty answers end the run with empty_response
// and a failing exit status.
func TestRunEmptyResponse(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.Text(""), openaitest.Text(""))
	events := filepath.Join(t.TempDir(), "events.jsonl")
	args := append([]string{"run"}, openaiArgs(t, srv, "--events", events, "hi")...)
	_, errOut, err := cli(t, args...)
	if err == nil {
		t.Fatalf("an empty answer succeeded:\n%s", errOut)
	}
	b, rerr := os.ReadFile(events)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !strings.Contains(string(b), `"type":"run.failed","session_id"`) || !strings.Contains(string(b), `"stop_reason":"empty_response"`) {
		t.Errorf("events:\n%s", b)
	}
	if !strings.Contains(errOut, "empty answer, retrying") || !strings.Contains(errOut, "empty_response") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

// TestRunShowsReasoning: reasoning streams dim on stderr (never on stdout)
// and --events carries it.
func TestRunShowsReasoning(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.Step{Reasoning: "Let me weigh this.", Text: "The answer."})
	events := filepath.Join(t.TempDir(), "events.jsonl")
	args := append([]string{"run"}, openaiArgs(t, srv, "--events", events, "hi")...)
	out, errOut, err := cli(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if strings.Contains(out, "weigh") || !strings.Contains(out, "The answer.") {
		t.Errorf("stdout %q", out)
	}
	if !strings.Contains(errOut, "thinking: Let me weigh this.") {
		t.Errorf("stderr lacks the reasoning:\n%s", errOut)
	}
	b, _ := os.ReadFile(events)
	if !strings.Contains(string(b), `"type":"reasoning.delta"`) {
		t.Errorf("events lack reasoning.delta:\n%s", b)
	}
}

// TestChatFailedTurn: after a failed turn the next prompt's request does
// not carry two user messages in a row.
func TestChatFailedTurn(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.Error(400, "bad luck"), openaitest.Text("Second answer."))
	in := "first question\nsecond question\n/quit\n"
	var out, errb bytes.Buffer
	args := append([]string{"chat"}, openaiArgs(t, srv)...)
	if err := run(t.Context(), args, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "bad luck") || !strings.Contains(out.String(), "Second answer.") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	msgs := reqs[1].Chat.Messages
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Role == "user" && msgs[i-1].Role == "user" {
			t.Fatalf("second request has two user messages in a row: %+v", msgs)
		}
	}
	if last := msgs[len(msgs)-1]; last.Role != "user" || last.Content != "second question" {
		t.Errorf("last message %+v", last)
	}
}

// TestConfigRequestShaping: the model.* shaping keys reach the wire, per
// model, and a bad value names its field.
func TestConfigRequestShaping(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.Text("ok"))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kernel.yaml")
	yaml := `model:
  parallel_tool_calls: true
  tool_choice: auto
  idle_timeout: 30s
  fallbacks: [gpt-backup]
  retry: {max_attempts: 2, base_delay: 10ms, max_delay: 20ms, budget: 3}
  overrides:
    o3-mini: {reasoning_effort: high, tool_choice: required}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "--config", cfg}, openaiArgs(t, srv, "--model", "o3-mini", "hi")...)
	if _, errOut, err := cli(t, args...); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	f := srv.Requests()[0].Fields
	if string(f["reasoning_effort"]) != `"high"` || string(f["tool_choice"]) != `"required"` || string(f["parallel_tool_calls"]) != "true" {
		t.Errorf("sent reasoning_effort %s tool_choice %s parallel_tool_calls %s", f["reasoning_effort"], f["tool_choice"], f["parallel_tool_calls"])
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("model:\n  reasoning_effort: extreme\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := cli(t, "run", "--config", bad, "hi")
	if err == nil || !strings.Contains(errOut+err.Error(), "model.reasoning_effort") {
		t.Errorf("bad reasoning_effort: %v\n%s", err, errOut)
	}
}

// TestChatThinkingToggle: /thinking off folds the reasoning into one line.
func TestChatThinkingToggle(t *testing.T) {
	srv := openaitest.NewServer(t,
		openaitest.Step{Reasoning: "FIRST-REASONING", Text: "One."},
		openaitest.Step{Reasoning: "SECOND-REASONING", Text: "Two."})
	in := "first\n/thinking off\nsecond\n/quit\n"
	var out, errb bytes.Buffer
	args := append([]string{"chat"}, openaiArgs(t, srv)...)
	if err := run(t.Context(), args, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	e := errb.String()
	if !strings.Contains(e, "thinking: FIRST-REASONING") || strings.Contains(e, "SECOND-REASONING") ||
		!strings.Contains(e, "thinking… (16 bytes hidden") {
		t.Errorf("stderr:\n%s", e)
	}
}
