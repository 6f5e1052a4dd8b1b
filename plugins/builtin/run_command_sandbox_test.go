//go:build linux

package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/sandboxtest"
)

// The attacks of issue 11, through run_command with its default grant.
// Each fails if the layer that stops it is removed.

func TestRunCommandSandboxKernelEnv(t *testing.T) {
	const key = "sk-runcmd-kernel-secret-51d2"
	t.Setenv("AGENTKERNEL_TEST_API_KEY", key)
	e := newEnv(t, Config{})
	res, err := e.call(t, "run_command", map[string]any{"argv": []string{"sh", "-c",
		`tr '\0' '\n' < /proc/$PPID/environ; tr '\0' '\n' < /proc/1/environ; for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; done; echo ppid=$PPID`}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Content, key) {
		t.Fatalf("the kernel's environment is readable from run_command:\n%s", res.Content)
	}
	if !strings.Contains(res.Content, "ppid=1") {
		t.Fatalf("the command's parent is not the sandbox's init:\n%s", res.Content)
	}
}

func TestRunCommandSandboxWrites(t *testing.T) {
	e := newEnv(t, Config{})
	if err := os.MkdirAll(filepath.Join(e.root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.root, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(e.outside, "written")
	res, err := e.call(t, "run_command", map[string]any{"argv": []string{"sh", "-c",
		"echo x > " + outside + "; cd / && echo x > " + outside + "; cd " + e.root +
			"; printf '[filter \"x\"]\\n\\tclean = id\\n' >> .git/config; mv .git moved; echo ok > inside; cat " + filepath.Join(e.outside, "secret.txt")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatalf("run_command wrote outside the workspace:\n%s", res.Content)
	}
	if b, _ := os.ReadFile(filepath.Join(e.root, ".git", "config")); string(b) != "[core]\n" {
		t.Fatalf("run_command changed .git/config to %q:\n%s", b, res.Content)
	}
	if b, _ := os.ReadFile(filepath.Join(e.root, "inside")); string(b) != "ok\n" {
		t.Fatalf("the workspace is not writable:\n%s", res.Content)
	}
	if strings.Contains(res.Content, secret) {
		t.Fatalf("run_command read a file outside the workspace:\n%s", res.Content)
	}
}

func TestRunCommandSandboxGitGrant(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	if err := os.MkdirAll(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	tools, closer, err := New(Config{Root: root, Enable: []string{NameRunCommand},
		CommandSandbox: sandbox.Grant{FS: []sandbox.FSRule{{Path: filepath.Join(root, ".git"), Mode: "rw"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	res, err := tools[0].Call(t.Context(), []byte(`{"argv":["sh","-c","echo granted > .git/HEAD"]}`))
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	if b, _ := os.ReadFile(filepath.Join(root, ".git", "HEAD")); string(b) != "granted\n" {
		t.Fatalf(".git is not writable with an rw grant: %q", b)
	}
}

func TestRunCommandSandboxNetwork(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs /usr/bin/python3 for the TCP client")
	}
	port := int(sandboxtest.Listener(t))
	args := map[string]any{"argv": []string{py, "-c", fmt.Sprintf(
		"import socket; s=socket.create_connection(('127.0.0.1', %d), timeout=5); print(s.recv(100).decode())", port)}}
	e := newEnv(t, Config{})
	res, err := e.call(t, "run_command", args)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Content, "reached") {
		t.Fatalf("run_command reached the network without a grant:\n%s", res.Content)
	}
	e = newEnv(t, Config{CommandSandbox: sandbox.Grant{Net: &sandbox.Net{Connect: []uint16{uint16(port)}}}})
	res, err = e.call(t, "run_command", args)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Content, "reached") {
		t.Fatalf("run_command did not reach the granted port:\n%s", res.Content)
	}
}

func TestRunCommandSandboxLimits(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	cases := []struct {
		name  string
		grant sandbox.Grant
		argv  []string
		limit string
	}{
		{"fork bomb", sandbox.Grant{MaxProcs: 16}, []string{"sh", "-c", "i=0; while [ $i -lt 400 ]; do sleep 601 & i=$((i+1)); done; exit 1"}, "max_procs"},
		{"memory bomb", sandbox.Grant{MemoryMB: 200}, []string{py, "-c", "x=[]\nwhile True: x.append(bytearray(8<<20))"}, "memory_mb"},
		{"cpu spin", sandbox.Grant{CPU: sandbox.Duration(1e9)}, []string{"sh", "-c", "while :; do :; done"}, "cpu"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Config{CommandSandbox: c.grant})
			res, err := e.call(t, "run_command", map[string]any{"argv": c.argv, "timeout_seconds": 60})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.HasPrefix(res.Content, "stopped: sandbox limit "+c.limit+" reached") {
				t.Fatalf("want the %s limit named, got:\n%s", c.limit, res.Content)
			}
		})
	}
	assertGone(t, "sleep\x00601")
}
