//go:build unix

package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunCommand(t *testing.T) {
	e := newEnv(t, Config{})
	mkfiles(t, e.root, map[string]string{"data.txt": "one\ntwo\n"})
	if err := os.WriteFile(filepath.Join(e.root, "hello.sh"), []byte("#!/bin/sh\necho hello from \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	realRoot, err := filepath.EvalSymlinks(e.root)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		argv    []string
		want    string // substring of the content
		isError bool
	}{
		{"exit 0", []string{"cat", "data.txt"}, "exit code: 0\nduration: ", false},
		{"output", []string{"cat", "data.txt"}, "output (8 bytes, stdout and stderr combined):\none\ntwo", false},
		{"stderr is captured", []string{"sh", "-c", "echo out; echo err >&2"}, "out\nerr", false},
		{"exit code", []string{"sh", "-c", "exit 3"}, "exit code: 3", true},
		{"no output", []string{"true"}, "output: none", false},
		{"working directory is the root", []string{"pwd", "-P"}, "combined):\n" + realRoot, false},
		{"relative program", []string{"./hello.sh", "the workspace"}, "hello from the workspace", false},
		{"killed by a signal", []string{"sh", "-c", "kill -9 $$"}, "terminated: signal: killed", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.call(t, "run_command", map[string]any{"argv": tc.argv})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Content, tc.want) {
				t.Fatalf("content %q does not contain %q", res.Content, tc.want)
			}
			if res.IsError != tc.isError {
				t.Fatalf("IsError = %v, want %v", res.IsError, tc.isError)
			}
		})
	}
	t.Run("program not found", func(t *testing.T) {
		_, err := e.call(t, "run_command", map[string]any{"argv": []string{"no-such-program-agentkernel"}})
		wantErr(t, err, `run no-such-program-agentkernel: exec: "no-such-program-agentkernel": executable file not found in $PATH`)
	})
}

// TestRunCommandNoShell proves argv is never given to a shell: shell
// syntax arrives as literal arguments and has no effect.
func TestRunCommandNoShell(t *testing.T) {
	e := newEnv(t, Config{})
	args := []string{"a; touch pwned1", "$(touch pwned2)", "`touch pwned3`", "| touch pwned4", "*", "$HOME", "&& touch pwned5"}
	res, err := e.call(t, "run_command", map[string]any{"argv": append([]string{"echo"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(args, " ") + "\n"; !strings.HasSuffix(res.Content, "combined):\n"+strings.TrimSuffix(want, "\n")) {
		t.Fatalf("echo did not get its arguments literally:\n%s\nwant output %q", res.Content, want)
	}
	for i := 1; i <= 5; i++ {
		if _, err := os.Stat(filepath.Join(e.root, fmt.Sprintf("pwned%d", i))); err == nil {
			t.Fatalf("pwned%d exists: a shell interpreted the arguments", i)
		}
	}
}

// TestRunCommandEnv proves the child sees only allowlisted variables.
func TestRunCommandEnv(t *testing.T) {
	t.Setenv("AGENTKERNEL_TEST_SECRET", "s3cr3t-value")
	t.Setenv("AGENTKERNEL_TEST_VISIBLE", "visible-value")
	tests := []struct {
		name      string
		allow     []string
		want, not []string
	}{
		{"default allowlist", nil, []string{"PATH=" + os.Getenv("PATH")}, []string{"s3cr3t", "visible-value"}},
		{"configured allowlist", []string{"AGENTKERNEL_TEST_VISIBLE"}, []string{"AGENTKERNEL_TEST_VISIBLE=visible-value"}, []string{"s3cr3t", "PATH="}},
		// Nothing allowed is set: the child must get an empty environment,
		// not the kernel's (a nil Env would pass everything).
		{"nothing set", []string{"AGENTKERNEL_TEST_UNSET"}, nil, []string{"s3cr3t", "visible-value", "PATH="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{CommandEnv: tc.allow})
			res, err := e.call(t, "run_command", map[string]any{"argv": []string{"env"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("env output lacks %q:\n%s", w, res.Content)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(res.Content, n) {
					t.Errorf("env output contains %q:\n%s", n, res.Content)
				}
			}
		})
	}
}

func TestRunCommandOutputCap(t *testing.T) {
	e := newEnv(t, Config{MaxOutputBytes: 1000})
	res, err := e.call(t, "run_command", map[string]any{"argv": []string{"seq", "1", "100000"}})
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ := strings.Cut(res.Content, "combined):\n")
	total := 0
	for i := 1; i <= 100000; i++ {
		total += len(strconv.Itoa(i)) + 1
	}
	if !strings.Contains(res.Content, fmt.Sprintf("output (%d bytes,", total)) {
		t.Fatalf("total not reported:\n%s", res.Content[:100])
	}
	if !strings.HasPrefix(out, "1\n2\n3\n") || !strings.HasSuffix(out, "99999\n100000") {
		t.Fatalf("head or tail lost:\n%s", out)
	}
	if want := fmt.Sprintf("\n[... %d bytes of output omitted: max_output_bytes is 1000 ...]\n", total-1000); !strings.Contains(out, want) {
		t.Fatalf("marker %q missing:\n%s", want, out)
	}
	if len(out) > 1000+100 {
		t.Fatalf("output is %d bytes, cap is 1000", len(out))
	}
}

// hostProcessesWith lists the live host processes whose command line
// contains tag (the program sees its PID namespace's pids, so the test
// finds its processes by their arguments).
func hostProcessesWith(t *testing.T, tag string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(b), tag) {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		_, rest, _ := strings.Cut(string(st), ") ")
		if !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X") {
			out = append(out, pid)
		}
	}
	return out
}

// assertGone checks that no process whose command line holds tag
// survived the call.
func assertGone(t *testing.T, tag string) {
	t.Helper()
	// SIGKILL is delivered asynchronously; allow the kernel a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := hostProcessesWith(t, tag)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				syscall.Kill(p, syscall.SIGKILL) // clean up before failing
			}
			t.Fatalf("processes left behind: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunCommandTimeoutKillsGroup starts a shell with a background child
// and a foreground child, lets it time out, and proves that neither the
// shell nor its children survive.
func TestRunCommandTimeoutKillsGroup(t *testing.T) {
	e := newEnv(t, Config{})
	start := time.Now()
	res, err := e.call(t, "run_command", map[string]any{
		"argv":            []string{"sh", "-c", "sleep 101.1 & sleep 101.1"},
		"timeout_seconds": 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Content, "timed out after 1s: the command and every process it started were killed") || !res.IsError {
		t.Fatalf("got %+v", res)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("call took %s", d)
	}
	assertGone(t, "sleep\x00101.1")
}

// TestRunCommandExitKillsGroup: a command that exits leaving a background
// process behind does not leave it running.
func TestRunCommandExitKillsGroup(t *testing.T) {
	e := newEnv(t, Config{})
	res, err := e.call(t, "run_command", map[string]any{
		"argv": []string{"sh", "-c", "sleep 101.2 >/dev/null 2>&1 &"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Content, "exit code: 0") {
		t.Fatalf("got %q", res.Content)
	}
	assertGone(t, "sleep\x00101.2")
}

// TestRunCommandCancelKillsGroup cancels the call's context mid-run.
func TestRunCommandCancelKillsGroup(t *testing.T) {
	e := newEnv(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.callCtx(ctx, t, "run_command", map[string]any{
			"argv": []string{"sh", "-c", "echo started > pids; sleep 101.3 & sleep 101.3"},
		})
		done <- err
	}()
	pidFile := filepath.Join(e.root, "pids")
	for deadline := time.Now().Add(10 * time.Second); len(hostProcessesWith(t, "sleep\x00101.3")) < 2; {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("the command did not write its pids")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, _ := os.ReadFile(pidFile); string(b) != "started\n" {
		t.Fatalf("pids file %q", b)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run_command did not return after cancellation")
	}
	assertGone(t, "sleep\x00101.3")
}

// TestRunCommandEscapedChild: a process that leaves the group (setsid),
// or is double-forked, and keeps the output pipe open neither holds the
// call nor survives it: it dies with the sandbox's PID namespace.
func TestRunCommandEscapedChild(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid(1) not available")
	}
	e := newEnv(t, Config{})
	start := time.Now()
	res, err := e.call(t, "run_command", map[string]any{
		"argv": []string{"sh", "-c", "setsid sleep 101.4 & (sleep 101.4 &) ; sleep 0.5; echo parent done"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("call took %s: the escaped child held the pipe", d)
	}
	if !strings.Contains(res.Content, "parent done") {
		t.Fatalf("got %q", res.Content)
	}
	assertGone(t, "sleep\x00101.4")
}

func TestRunCommandTimeoutClamp(t *testing.T) {
	e := newEnv(t, Config{CommandTimeout: time.Second})
	// Direct calls skip the schema's maximum: the configured cap still holds.
	res, err := e.call(t, "run_command", map[string]any{"argv": []string{"sleep", "30"}, "timeout_seconds": 3600})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Content, "timed out after 1s") {
		t.Fatalf("got %q", res.Content)
	}
	if got := e.tools["run_command"].Spec().Timeout; got != time.Second+specGrace {
		t.Fatalf("spec timeout %s", got)
	}
}

func TestReadFileFIFO(t *testing.T) {
	e := newEnv(t, Config{})
	if err := syscall.Mkfifo(filepath.Join(e.root, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Without O_NONBLOCK opening a FIFO with no writer would hang here.
	_, err := e.callCtx(ctx, t, "read_file", map[string]any{"path": "pipe"})
	wantErr(t, err, `read "pipe": not a regular file (named pipe)`)
	_, err = e.callCtx(ctx, t, "write_file", map[string]any{"path": "pipe", "content": "x"})
	wantErr(t, err, `write "pipe": not a regular file (named pipe)`)
	out := e.mustCall(t, "search", map[string]any{"pattern": "x"})
	if !strings.HasPrefix(out, "search: no matches") {
		t.Fatalf("got %q", out)
	}
}
