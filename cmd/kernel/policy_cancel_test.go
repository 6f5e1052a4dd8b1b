package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPolicyCheckSIGTERM sends SIGTERM to `kernel policy check` while it
// loads a policy of 20,000 rules with a test each: the load stops, the
// CLI says so and exits 130. The file is a FIFO, so the test knows the
// process is reading it (its signal handler is installed) before it writes
// the policy and signals.
func TestPolicyCheckSIGTERM(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "big.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	var src bytes.Buffer
	src.WriteString("name: big\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n")
	const n = 20000
	for i := range n {
		fmt.Fprintf(&src, "  - {id: r%d, effect: deny, tools: [read_file], when: 'call.args.path == \"f%d\"'}\n", i, i)
	}
	src.WriteString("tests:\n")
	for i := range n {
		fmt.Fprintf(&src, "  - {name: t%d, input: {call: {tool: read_file, args: {path: f%d}}}, expect: {decision: deny}}\n", i, i)
	}

	cmd := exec.Command(os.Args[0], "policy", "check", fifo)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Opening the FIFO for writing succeeds once the process opened it for
	// reading.
	var w *os.File
	deadline := time.Now().Add(30 * time.Second)
	for w == nil {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			w = f
		case !errors.Is(err, syscall.ENXIO):
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			t.Fatalf("kernel exited before reading the policy: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("kernel never opened the policy:\n%s", stderr.String())
		}
		if w == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := w.Write(src.Bytes()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("kernel did not stop after SIGTERM:\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupt {
		t.Fatalf("exit = %v, want status %d\n%s", err, exitInterrupt, stderr.String())
	}
	for _, want := range []string{"cancelling…", "kernel: policy ", ": cancelled while ", "context canceled (interrupted)"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
