package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/agentkernel/agentkernel/internal/testutil"
)

func TestChatDrivenByStdin(t *testing.T) {
	in := "What does this project do?\n/usage\n/sessions\n/bogus\n/new\n/quit\n"
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"chat", "--config", demoConfig}, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "finds broken relative links") {
		t.Fatalf("no answer on stdout:\n%s", out.String())
	}
	for _, want := range []string{"· 1 run · 4 turns ·", "ID  ", "idle", "unknown command /bogus", "new session"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
}

// ptyOutput collects what a process writes to its terminal.
type ptyOutput struct{ testutil.SyncBuffer }

func (p *ptyOutput) waitFor(t *testing.T, want string, after int) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if i := strings.Index(p.String()[after:], want); i >= 0 {
			return after + i + len(want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("terminal never showed %q; it shows:\n%s", want, p.String())
	return 0
}

// TestChatCtrlCUnderPTY runs `kernel chat` on a real pseudo-terminal: Ctrl-C
// cancels the running turn (a tool sleeping 30 s) and the chat goes on.
func TestChatCtrlCUnderPTY(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o700); err != nil {
		t.Fatal(err)
	}
	script := "steps:\n  - tool_calls:\n      - name: run_command\n        args: {argv: [sleep, \"30\"]}\n  - match: {role: user, contains: again}\n    text: Hello again.\n"
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\ntools:\n  builtin:\n    enable: [run_command]\n"
	for name, body := range map[string]string{"script.yaml": script, "kernel.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "chat", "--config", filepath.Join(dir, "kernel.yaml"))
	cmd.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1", "NO_COLOR=1") // the answer as written, not rendered
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out := &ptyOutput{}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, tty)
	}()
	pos := out.waitFor(t, "› ", 0)
	tty.Write([]byte("sleep please\r"))
	pos = out.waitFor(t, `run_command {"argv":["sleep","30"]}`, pos)
	time.Sleep(100 * time.Millisecond)
	tty.Write([]byte{3}) // Ctrl-C, turned into SIGINT by the terminal
	pos = out.waitFor(t, "cancelled; the session keeps everything up to here", pos)
	pos = out.waitFor(t, "› ", pos)
	tty.Write([]byte("hello again\r"))
	pos = out.waitFor(t, "Hello again.", pos)
	out.waitFor(t, "› ", pos)
	tty.Write([]byte("/quit\r"))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chat exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("chat did not exit after /quit")
	}
	tty.Close()
	<-copied
}
