//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox/sandboxtest"
)

// TestSandboxRoundTwoThroughTheCLI plays issue 25's sandbox attacks with
// a scripted model through `kernel run` and run_command's default grant
// (plus memory_mb and max_procs): a daemon's unix sockets under /run,
// /var/tmp and /tmp (the workspace is under /tmp), the launcher as a
// target (ptrace, its descriptors, a forged report), three processes
// that together pass memory_mb, and a fork bomb. Each assertion fails
// with the layer that holds it removed (see the sandbox package's tests
// of the same names).
func TestSandboxRoundTwoThroughTheCLI(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Fatalf("needs /usr/bin/python3 (make test-deps): %v", err)
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	var calls strings.Builder
	call := func(argv ...string) {
		q := make([]string, len(argv))
		for i, a := range argv {
			q[i] = yamlDQuote(a)
		}
		calls.WriteString("  - tool_calls:\n      - {name: run_command, args: {argv: [" + strings.Join(q, ", ") + "]}}\n")
	}
	for _, base := range []string{"/run", "/var/tmp", "/tmp"} {
		_, stream, dgram, got := sandboxtest.UnixDaemon(t, base)
		call("python3", "-c", sandboxtest.UnixClient, stream, dgram)
		t.Cleanup(func() {
			if len(got) > 0 {
				t.Errorf("a datagram reached the daemon under %s", base)
			}
		})
	}
	call("python3", "-c", sandboxtest.LauncherAttack)
	call("python3", "-c", sandboxtest.MemoryTogether)
	call("sh", "-c", "b() { b | b & }; b; sleep 2")
	script := "steps:\n" + calls.String() + "  - text: done\n"
	cfg := "model: {provider: scripted, name: m, script: script.yaml}\nworkspace: ws\n" +
		"tools:\n  builtin:\n    enable: [run_command]\n    command_sandbox: {memory_mb: 256, max_procs: 32}\n"
	out := runScripted(t, dir, script, cfg)
	// (The scripts are in the session too: count what only their output says.)
	if strings.Count(out, "stream refused: [Errno") != 3 || strings.Count(out, "dgram refused: [Errno") != 3 {
		t.Errorf("a host unix socket was reached from run_command:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), " ok") && !strings.Contains(line, "pidfd_open") {
			t.Errorf("the program reached the launcher: %s", line)
		}
	}
	for _, want := range []string{"exit code: 7", "stopped: sandbox limit memory_mb reached", "stopped: sandbox limit max_procs reached"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the session:\n%s", want, out)
		}
	}
}
