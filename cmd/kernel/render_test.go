package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// A tool that answers with an error result (IsError, no kernel error) is
// shown as failed with its size, not as an empty "✗ tool:" line; a kernel
// error shows its message.
func TestRenderToolErrors(t *testing.T) {
	var out, errb bytes.Buffer
	r := &renderer{stdout: &out, stderr: &errb}
	r.event(kernel.ToolCompleted{CallID: "c1", Tool: "starlark", Outcome: kernel.OutcomeError, IsError: true, Bytes: 83, Duration: 740 * time.Millisecond})
	r.event(kernel.ToolCompleted{CallID: "c2", Tool: "run_command", Outcome: kernel.OutcomeError, IsError: true, Error: "timed out after 5s\nmore", Bytes: 30})
	got := errb.String()
	for _, want := range []string{"✗ starlark · 740.0ms · 83 B · the tool reported an error", "✗ run_command: timed out after 5s"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "starlark: \n") || strings.Contains(got, "more") {
		t.Errorf("empty or multi-line error shown:\n%s", got)
	}
}
