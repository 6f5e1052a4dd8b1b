package main

import (
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// TestRunAgainstOpenAICompatibleServer runs `kernel run --provider openai`
// against a local server replaying OpenAI's wire format: a tool call, the
// tool, then the answer.
func TestRunAgainstOpenAICompatibleServer(t *testing.T) {
	srv := openaitest.NewServer(t,
		openaitest.ToolCall("read_file", `{"path":"README.md"}`),
		openaitest.Text("linkcheck reports broken relative links in Markdown files."),
	)
	t.Setenv("AGENTKERNEL_TEST_KEY", "sk-test-not-a-real-key")
	out, errOut, err := cli(t, "run", "--provider", "openai", "--base-url", srv.URL(), "--api-key-env", "AGENTKERNEL_TEST_KEY",
		"--model", "gpt-test", "--workspace", "../../examples/demo/workspace", "--store", t.TempDir(), "What does this project do?")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(out, "reports broken relative links") || !strings.Contains(errOut, "✓ read_file") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	second := string(reqs[1].Body)
	if !strings.Contains(second, `"role":"tool"`) || !strings.Contains(second, "linkcheck finds broken links") {
		t.Fatalf("the tool result did not reach the model: %s", second)
	}
	if auth := reqs[0].Header.Get("Authorization"); auth != "Bearer sk-test-not-a-real-key" {
		t.Fatalf("Authorization = %q", auth)
	}
}
