package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// markdownScript answers with Markdown: bold text, a heading, a list and
// a fenced code block with a blank line inside it.
const markdownScript = "steps:\n  - text: \"The file says **hello**.\\n\\n## Next steps\\n\\n- read `main.go`\\n- run the tests\\n\\n```go\\nfunc main() {\\n\\n}\\n```\\n\\nDone.\"\n"

// terminalEnv is the environment of a child on a terminal: a color
// terminal, without NO_COLOR.
func terminalEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, markdownStyleEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "KERNEL_TEST_MAIN=1", "TERM=xterm-256color"), extra...)
}

// startPTY starts the test binary as `kernel ARGS...` on a terminal of
// cols columns and collects what it writes there.
func startPTY(t *testing.T, cols uint16, env []string, args ...string) (*exec.Cmd, *os.File, *ptyOutput, chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = env
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: cols, Rows: 50})
	if err != nil {
		t.Fatal(err)
	}
	out := &ptyOutput{}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, tty)
	}()
	return cmd, tty, out, copied
}

// waitExit waits for cmd and the copy of its terminal's output.
func waitExit(t *testing.T, cmd *exec.Cmd, tty *os.File, copied chan struct{}) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v exited with %v", cmd.Args, err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v did not exit", cmd.Args)
	}
	// The copy ends by itself once it has read everything the program
	// wrote (the terminal's last writer is gone: EIO). Closing the
	// terminal first would drop what the copy had not read yet, the
	// table's last rows on a loaded machine.
	select {
	case <-copied:
	case <-time.After(30 * time.Second):
		t.Errorf("%v: its terminal's output did not end after it exited", cmd.Args)
	}
	tty.Close()
	<-copied
}

// TestChatRendersMarkdownOnATerminal: a chat session on a terminal shows
// the answer's Markdown rendered (bold as bold, no ** or ## marks, the
// code block whole although a blank line is inside it); the same session
// through a pipe shows the text as the model wrote it, without escape
// sequences.
func TestChatRendersMarkdownOnATerminal(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"script.yaml": markdownScript})
	args := []string{"chat", "--script", filepath.Join(dir, "script.yaml"), "--store", filepath.Join(dir, "store")}

	cmd, tty, out, copied := startPTY(t, 80, terminalEnv(), args...)
	pos := out.waitFor(t, "› ", 0)
	tty.Write([]byte("what does the file say?\r"))
	pos = out.waitFor(t, "Done.", pos)
	out.waitFor(t, "› ", pos)
	tty.Write([]byte("/quit\r"))
	waitExit(t, cmd, tty, copied)
	screen := out.String()
	answer := screen[strings.Index(screen, "what does the file say?"):]
	for _, bad := range []string{"**hello**", "## Next", "```"} {
		if strings.Contains(answer, bad) {
			t.Errorf("the terminal shows the Markdown mark %q raw:\n%q", bad, answer)
		}
	}
	for _, want := range []string{";1mhello\x1b[0m", "Next", "main.go", "func", "•"} {
		if !strings.Contains(answer, want) {
			t.Errorf("the terminal lacks %q of the rendered answer:\n%q", want, answer)
		}
	}

	// Through a pipe: the model's text, as written.
	pipe := exec.Command(os.Args[0], args...)
	pipe.Env = terminalEnv()
	pipe.Stdin = strings.NewReader("what does the file say?\n/quit\n")
	got, err := pipe.Output()
	if err != nil {
		t.Fatalf("chat through a pipe: %v", err)
	}
	if !strings.Contains(string(got), "The file says **hello**.\n\n## Next steps\n\n- read `main.go`") || strings.Contains(string(got), "\x1b[") {
		t.Errorf("a pipe gets rendered or altered text:\n%q", got)
	}
}

// TestRunMarkdownPlainWithNoColor: `kernel run` on a terminal renders the
// answer, and with NO_COLOR set writes it as the model wrote it.
func TestRunMarkdownPlainWithNoColor(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"script.yaml": markdownScript})
	args := []string{"run", "--quiet", "--script", filepath.Join(dir, "script.yaml"), "--store", filepath.Join(dir, "store"), "hi"}
	for _, tc := range []struct {
		name     string
		env      []string
		rendered bool
	}{
		{"terminal", terminalEnv(), true},
		{"NO_COLOR", terminalEnv("NO_COLOR=1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, tty, out, copied := startPTY(t, 80, tc.env, args...)
			waitExit(t, cmd, tty, copied)
			screen := strings.ReplaceAll(out.String(), "\r\n", "\n")
			if raw := strings.Contains(screen, "**hello**"); raw == tc.rendered {
				t.Errorf("rendered %v, but the output is:\n%q", tc.rendered, screen)
			}
			if esc := strings.Contains(screen, "\x1b["); esc != tc.rendered {
				t.Errorf("escape sequences: %v, want %v:\n%q", esc, tc.rendered, screen)
			}
		})
	}
}

func TestCompleteBlocks(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"partial line", ""},
		{"one line\n", ""},
		{"para\n\nnext", "para\n\n"},
		{"a\n\nb\n\nc", "a\n\nb\n\n"},
		{"```\ncode\n\nmore\n", ""},
		{"```\ncode\n\nmore\n```\n\nafter", "```\ncode\n\nmore\n```\n\n"},
		{"````\n```\n\n````\n\n", "````\n```\n\n````\n\n"},
		{"~~~\nx\n\n```\n\n", ""},
		{"    ```\nindented, not a fence\n\nnext", "    ```\nindented, not a fence\n\n"},
	} {
		if got := tc.in[:completeBlocks(tc.in)]; got != tc.want {
			t.Errorf("completeBlocks(%q) keeps %q, want %q", tc.in, got, tc.want)
		}
	}
}
