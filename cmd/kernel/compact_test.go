package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// TestSessionsCompact forces a compaction of a stored session through the
// CLI: the summary comes from the (fake) model, `sessions show` marks the
// record and `--context` prints the request built from it.
func TestSessionsCompact(t *testing.T) {
	srv := openaitest.NewServer(t,
		openaitest.Text("Hello, I am ready."),
		openaitest.Text("The user greeted the agent; nothing else happened."),
	)
	store := t.TempDir()
	args := []string{"--provider", "openai", "--base-url", srv.URL(), "--model", "gpt-4o-mini",
		"--workspace", "../../examples/demo/workspace", "--store", store}
	_, errOut, err := cli(t, append([]string{"run"}, append(args, "hi there")...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	sid := regexp.MustCompile(`session ([0-9a-z]{16})`).FindStringSubmatch(errOut)[1]
	out, errOut, err := cli(t, append([]string{"sessions", "compact", sid}, args...)...)
	if err != nil || !strings.Contains(out, "compacted "+sid+": 1 messages summarised through #1") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "You compact the history") || len(reqs[1].Chat.Tools) != 0 {
		t.Fatalf("the summary request: %s", reqs[len(reqs)-1].Body)
	}
	show, _, err := cli(t, "sessions", "show", sid, "--store", store)
	if err != nil || !strings.Contains(show, "── compacted: the model sees from here a summary of #1–#1 (with request #1 verbatim)") {
		t.Fatalf("%v\n%s", err, show)
	}
	ctxOut, _, err := cli(t, "sessions", "show", sid, "--context", "--store", store)
	if err != nil || !strings.Contains(ctxOut, kernel.SummaryPrefix[:40]) || !strings.Contains(ctxOut, "#1 user") || !strings.Contains(ctxOut, "#2 assistant") {
		t.Fatalf("%v\n%s", err, ctxOut)
	}
}
