package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/sandbox"
)

// TestPrestartedAttacks runs the attack tests again through pre-started
// launchers (CommandPrestarted, as run_command and command hooks start):
// every layer must hold the same way when the program arrives over the
// launcher's socket.
func TestPrestartedAttacks(t *testing.T) {
	command = sandbox.CommandPrestarted
	t.Cleanup(func() { command = sandbox.Command })
	before := sandbox.Prestarted()
	runAttackTests(t)
	if after := sandbox.Prestarted(); after.Hits+after.Misses == before.Hits+before.Misses {
		t.Fatal("no start went through the pre-started path")
	}
}

// runPrestarted runs argv through a launcher that is ready (WarmUp first)
// and returns the output and Wait's error.
func runPrestarted(t *testing.T, ctx context.Context, g sandbox.Grant, dir string, argv ...string) (string, error) {
	t.Helper()
	if err := sandbox.WarmUp(ctx, g); err != nil {
		t.Fatalf("WarmUp: %v", err)
	}
	return runNoWarmUp(t, ctx, g, dir, argv...)
}

// runNoWarmUp runs argv through CommandPrestarted with what is ready.
func runNoWarmUp(t *testing.T, ctx context.Context, g sandbox.Grant, dir string, argv ...string) (string, error) {
	t.Helper()
	cmd, err := sandbox.CommandPrestarted(ctx, g, argv)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// TestPrestartedHit: a start after WarmUp takes the ready launcher.
func TestPrestartedHit(t *testing.T) {
	ws := newWorkspace(t)
	g := workspaceGrant(ws)
	before := sandbox.Prestarted()
	out, err := runPrestarted(t, context.Background(), g, ws, "sh", "-c", "echo $PPID")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.TrimSpace(out) != "1" {
		t.Fatalf("the program's parent is pid %q in its namespace, want 1 (the launcher)", out)
	}
	if after := sandbox.Prestarted(); after.Hits != before.Hits+1 {
		t.Fatalf("hits %d -> %d: the ready launcher was not used", before.Hits, after.Hits)
	}
}

// TestNoDescriptorInherited: the program's descriptors are its stdio and
// nothing else: not the socket a pre-started launcher got the program on
// (which would let it hand programs to other launchers), and not a
// descriptor the kernel itself inherited without close-on-exec (here a
// secret file the test opens that way).
func TestNoDescriptorInherited(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("kernel secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(secret, syscall.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	ws := newWorkspace(t)
	for name, start := range map[string]func(*testing.T, sandbox.Grant, string, ...string) (string, error){
		"cold": run,
		"prestarted": func(t *testing.T, g sandbox.Grant, dir string, argv ...string) (string, error) {
			return runPrestarted(t, context.Background(), g, dir, argv...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := start(t, workspaceGrant(ws), ws, "ls", "-l", "/proc/self/fd/")
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) < 3 || f[len(f)-2] != "->" {
					continue
				}
				n, _ := strconv.Atoi(f[len(f)-3])
				target := f[len(f)-1]
				// 3 is ls's own listing of the directory.
				if n > 2 && !(n == 3 && strings.HasSuffix(target, "/fd")) {
					t.Errorf("the program holds descriptor %d -> %s", n, target)
				}
			}
			if o2, _ := start(t, workspaceGrant(ws), ws, "cat", fmt.Sprintf("/proc/self/fd/%d", fd)); strings.Contains(o2, "kernel secret") {
				t.Errorf("the program read the kernel's inherited descriptor: %q", o2)
			}
		})
	}
}

// TestPrestartedIsolation: two programs through the same grant never
// share a launcher: the second sees neither the first's /tmp nor the
// process it left running.
func TestPrestartedIsolation(t *testing.T) {
	ws := newWorkspace(t)
	g := workspaceGrant(ws)
	ctx := context.Background()
	if out, err := runPrestarted(t, ctx, g, ws, "sh", "-c", "echo secret > /tmp/left && (setsid sleep 300 &) ; echo started"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	out, err := runPrestarted(t, ctx, g, ws, "sh", "-c", "cat /tmp/left 2>&1; ls /proc | grep -c '^[0-9]'")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(out, "secret") {
		t.Fatalf("the second program read the first one's /tmp: %q", out)
	}
	// sh, its subshell for the pipeline, ls, grep and the launcher: no sleep.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if n, _ := strconv.Atoi(lines[len(lines)-1]); n > 5 {
		t.Fatalf("%d processes visible to the second program (the first one's sleep?): %q", n, out)
	}
}

// TestPrestartedStaleWorkspace: a launcher made ready for a workspace
// that was then replaced (same path, new directory) is not used: its
// Landlock rules and bind mounts hold the old directory.
func TestPrestartedStaleWorkspace(t *testing.T) {
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	g := workspaceGrant(ws)
	ctx := context.Background()
	if err := sandbox.WarmUp(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ws, ws+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := sandbox.Prestarted()
	out, err := runNoWarmUp(t, ctx, g, ws, "sh", "-c", "echo new > f && echo x > .git/config")
	if after := sandbox.Prestarted(); after.Stale != before.Stale+1 {
		t.Errorf("stale %d -> %d: the launcher for the old directory was not discarded", before.Stale, after.Stale)
	}
	if err == nil {
		t.Fatalf("writing .git/config in the new workspace succeeded: it is not read-only (%s)", out)
	}
	if b, rerr := os.ReadFile(filepath.Join(ws, "f")); rerr != nil || string(b) != "new\n" {
		t.Fatalf("the write did not land in the new workspace: %q %v (%s)", b, rerr, out)
	}
	if _, err := os.Stat(filepath.Join(ws+".old", "f")); err == nil {
		t.Fatal("the write landed in the old workspace")
	}
}

// TestPrestartedCancel: cancelling the context kills the program and all
// it started, and Wait says why.
func TestPrestartedCancel(t *testing.T) {
	ws := newWorkspace(t)
	g := workspaceGrant(ws)
	if err := sandbox.WarmUp(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := sandbox.CommandPrestarted(ctx, g, []string{"sh", "-c", "sleep 300 & sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = ws
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	cancel()
	err = cmd.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v, want context.Canceled", err)
	}
	waitGone(t, pid)
}

// waitGone waits until pid no longer exists (reaped), for at most a
// minute.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return // dead, not yet reaped by its parent
		}
	}
	t.Fatalf("process %d still runs", pid)
}

const warmHelperEnv = "SANDBOX_TEST_WARM_HELPER"

// warmHelper makes a launcher ready, prints "ready", and sleeps until
// killed.
func warmHelper() {
	ws, _ := os.MkdirTemp("", "warm")
	if err := sandbox.WarmUp(context.Background(), workspaceGrant(ws)); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
	os.Exit(0)
}

// TestPrestartedDieWithKernel: ready launchers die with the process that
// started them, even when it is SIGKILLed, so none outlives the kernel.
func TestPrestartedDieWithKernel(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), warmHelperEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q", line)
	}
	kids := children(cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("the helper has no child: where is its ready launcher?")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for _, k := range kids {
		waitGone(t, k)
	}
}

// children lists the child processes of pid, over all its threads.
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
