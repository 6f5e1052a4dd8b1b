package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var sessionLine = regexp.MustCompile(`session (\w{16}) \(new\)`)

// TestSessionAcrossProcesses runs the CLI twice as separate processes on one
// store: the second run continues the first one's conversation.
func TestSessionAcrossProcesses(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	store := t.TempDir()
	kernelProc := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], append(args, "--store", store)...)
		cmd.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1")
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kernel %v: %v\n%s", args, err, errb.String())
		}
		return out.String(), errb.String()
	}
	_, errOut := kernelProc("run", "--config", demoConfig, "What does this project do?")
	m := sessionLine.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no new session id in:\n%s", errOut)
	}
	id := m[1]
	out, errOut := kernelProc("run", "--config", demoConfig, "--session", id, "Where would tests go?")
	if !strings.Contains(out, "From what I read before") || !strings.Contains(errOut, "session "+id+" ·") {
		t.Fatalf("second run did not continue the session:\n%s\n%s", out, errOut)
	}
	list, _ := kernelProc("sessions", "ls", "--config", demoConfig)
	if !strings.Contains(list, id) || !strings.Contains(list, "What does this project do?") {
		t.Fatalf("sessions ls:\n%s", list)
	}
	show, _ := kernelProc("sessions", "show", id)
	for _, want := range []string{"2 runs · 5 turns", "→ list_dir", "✓ search", "Where would tests go?"} {
		if !strings.Contains(show, want) {
			t.Errorf("sessions show lacks %q:\n%s", want, show)
		}
	}
	export := filepath.Join(t.TempDir(), "s.jsonl")
	kernelProc("sessions", "export", id, "-o", export)
	other := t.TempDir()
	cmd := exec.Command(os.Args[0], "sessions", "import", export, "--store", other)
	cmd.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1")
	got, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(got)) != id {
		t.Fatalf("import into a fresh store: %q %v", got, err)
	}
	rm, _ := kernelProc("sessions", "rm", id)
	if !strings.Contains(rm, "removed "+id) {
		t.Fatalf("rm: %s", rm)
	}
	list, _ = kernelProc("sessions", "ls")
	if strings.Contains(list, id) {
		t.Fatalf("session still listed after rm:\n%s", list)
	}
}

func TestSessionsUsageErrors(t *testing.T) {
	store := t.TempDir()
	for args, want := range map[string]string{
		"show":                    "sessions show needs a session id",
		"gc":                      "sessions gc needs --older-than",
		"gc --older-than 3 weeks": "--older-than",
		"frob":                    `unknown sessions subcommand "frob"`,
		"show nope":               "not found",
	} {
		_, _, err := cli(t, append(append([]string{"sessions"}, strings.Fields(args)...), "--store", store)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("sessions %s: %v, want %q", args, err, want)
		}
	}
}
