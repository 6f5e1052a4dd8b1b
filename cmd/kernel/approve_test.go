package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApproveAndRejectUnderCodingPolicy: under examples/policies/coding.yaml
// a write outside src/ stops the run for approval; `kernel approve` runs it
// and continues, `kernel reject` ends the run without running it, and a
// destructive command is denied outright.
func TestApproveAndRejectUnderCodingPolicy(t *testing.T) {
	conf, ws := codingPolicyFixture(t)
	store := t.TempDir()
	for _, approve := range []bool{true, false} {
		_, errOut, err := cli(t, "run", "--config", conf, "--store", store, "add a note to the workspace")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		for _, want := range []string{"policy: deny run_command: destructive command refused: rm -rf build (rule no-rm-rf)",
			"approval required: write_file", "write outside src/: NOTES.md", "awaiting_approval"} {
			if !strings.Contains(errOut, want) {
				t.Fatalf("run output lacks %q:\n%s", want, errOut)
			}
		}
		if _, err := os.Stat(filepath.Join(ws, "NOTES.md")); !os.IsNotExist(err) {
			t.Fatal("the write ran before approval")
		}
		id := sessionLine.FindStringSubmatch(errOut)[1]
		verb := "reject"
		if approve {
			verb = "approve"
		}
		out, errOut, err := cli(t, verb, "--config", conf, "--store", store, "--yes", id, "--note", "ok by me")
		if err != nil {
			t.Fatalf("%s: %v\n%s", verb, err, errOut)
		}
		_, statErr := os.Stat(filepath.Join(ws, "NOTES.md"))
		if approve {
			if statErr != nil || !strings.Contains(out, "Wrote NOTES.md.") || !strings.Contains(errOut, "approval approved write_file") {
				t.Fatalf("approve: file %v\nstdout %s\nstderr %s", statErr, out, errOut)
			}
			// The approval resumes the run: its third turn, not a new [1/8].
			if !strings.Contains(errOut, "[3/8] calling model") || strings.Contains(errOut, "[1/8]") || !strings.Contains(errOut, "completed · 3 turns") {
				t.Fatalf("approve: the resumed run does not continue the turn count:\n%s", errOut)
			}
			os.Remove(filepath.Join(ws, "NOTES.md"))
		} else if statErr == nil || !strings.Contains(out, "I did not run write_file: rejected: ok by me.") {
			t.Fatalf("reject: file %v\nstdout %s\nstderr %s", statErr, out, errOut)
		}
		if _, _, err := cli(t, "approve", "--config", conf, "--store", store, id); err == nil || !strings.Contains(err.Error(), "no pending approval") {
			t.Fatalf("second approve: %v", err)
		}
	}
}

// TestPolicyCommands exercises check, test and explain on the examples.
func TestPolicyCommands(t *testing.T) {
	out, _, err := cli(t, "policy", "test", "--config", "../../examples/kernel.yaml", "../../examples/policies/coding.yaml", "../../examples/policies/ci-bot.yaml")
	if err != nil || !strings.Contains(out, "ok  \t../../examples/policies/coding.yaml") {
		t.Fatalf("policy test: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nrevision: \"1\"\nrules:\n  - id: r\n    effect: deny\n    when: tool.nmae == \"x\"\n"), 0o600)
	_, _, err = cli(t, "policy", "check", bad)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:6:") || !strings.Contains(err.Error(), "nmae") {
		t.Fatalf("misspelt field: %v", err)
	}
}

// TestChatApproveConfirms: chat's /approve shows the whole call waiting
// for approval and runs it only after a yes, like `kernel approve`: a "n"
// leaves it waiting and unrun, a "y" runs it.
func TestChatApproveConfirms(t *testing.T) {
	conf, ws := codingPolicyFixture(t)
	in := "add a note to the workspace\n/approve\nn\n/approve looks fine\ny\n/quit\n"
	var out, errb strings.Builder
	if err := run(t.Context(), []string{"chat", "--config", conf, "--store", t.TempDir()}, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	e := errb.String()
	first := strings.Index(e, "run this call? [y/N]")
	no := strings.Index(e, "not approved: the call still waits")
	if first < 0 || no < first || !strings.Contains(e[:first], "waiting for approval:\ntool: write_file") {
		t.Fatalf("the first /approve did not show the call and ask, or the no was not honoured:\n%s", e)
	}
	if strings.Index(e[no:], "approval approved write_file") < 0 || strings.Count(e, "run this call? [y/N]") != 2 {
		t.Fatalf("the second /approve did not ask and run:\n%s", e)
	}
	if strings.Contains(e[:no], "approval approved") {
		t.Fatalf("the call was approved before the yes:\n%s", e)
	}
	if _, err := os.Stat(filepath.Join(ws, "NOTES.md")); err != nil {
		t.Fatalf("the approved write did not run: %v\n%s", err, e)
	}
}
