package proc_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/proc"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}

func grant(t *testing.T) (sandbox.Grant, string) {
	ws := t.TempDir()
	return sandbox.Grant{FS: append(sandbox.SystemDirs(), sandbox.FSRule{Path: ws, Mode: "rw"})}, ws
}

func TestEnvAllowlist(t *testing.T) {
	t.Setenv("PROC_TEST_SET", "v")
	os.Unsetenv("PROC_TEST_UNSET")
	env := proc.Env([]string{"PROC_TEST_SET", "PROC_TEST_UNSET"})
	if len(env) != 1 || env[0] != "PROC_TEST_SET=v" {
		t.Fatalf("Env = %q", env)
	}
	if env := proc.Env(nil); env == nil {
		t.Fatal("Env(nil) is nil: exec would pass the whole environment")
	}
}

// TestExitExplained: every way a process ends is explained the same way,
// cold or through a pre-started launcher.
func TestExitExplained(t *testing.T) {
	g, ws := grant(t)
	for _, pre := range []bool{false, true} {
		for _, c := range []struct {
			name  string
			g     func(*sandbox.Grant)
			argv  []string
			want  string
			code  int
			fails bool
		}{
			{"exit 0", nil, []string{"true"}, "exit code: 0", 0, false},
			{"exit 3", nil, []string{"sh", "-c", "exit 3"}, "exit code: 3", 3, true},
			{"signal", nil, []string{"sh", "-c", "kill -9 $$"}, "terminated: signal: killed", -1, true},
			{"limit", func(g *sandbox.Grant) { g.MaxProcs = 8 }, []string{"sh", "-c", "b() { b | b & }; b; sleep 1"}, "stopped: sandbox limit max_procs reached", -1, true},
			{"not run", nil, []string{"/nonexistent/program"}, "not run: sandbox: ", -1, true},
		} {
			g := g
			if c.g != nil {
				c.g(&g)
			}
			p, err := proc.Start(context.Background(), proc.Spec{Argv: c.argv, Dir: ws, Grant: g, Env: []string{"PATH"}, Prestarted: pre})
			if err != nil {
				t.Fatalf("%s (prestarted %v): %v", c.name, pre, err)
			}
			e := p.Wait()
			if !strings.HasPrefix(e.String(), c.want) || e.Failed() != c.fails || (c.code >= 0 && e.Code() != c.code) {
				t.Errorf("%s (prestarted %v): %q code %d failed %v, want %q code %d failed %v", c.name, pre, e, e.Code(), e.Failed(), c.want, c.code, c.fails)
			}
		}
	}
}

// TestKillKillsTheGroup: Kill ends the program and everything it started,
// and the Exit says its owner killed it.
func TestKillKillsTheGroup(t *testing.T) {
	g, ws := grant(t)
	out := &testutil.SyncBuffer{}
	p, err := proc.Start(context.Background(), proc.Spec{Argv: []string{"sh", "-c", "sleep 613.5 & echo started; sleep 613.5"},
		Dir: ws, Grant: g, Env: []string{"PATH"}, Stdout: out, Stderr: out})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "started"); {
		if time.Now().After(deadline) {
			t.Fatalf("the program did not start: %q", out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Kill()
	e := p.Wait()
	if !e.Killed || !e.Failed() {
		t.Fatalf("exit %+v: want killed and failed", e)
	}
	if pids := sleeping("613.5"); len(pids) > 0 {
		t.Fatalf("processes survived Kill: %v", pids)
	}
	p.Kill() // after the end: nothing, no error
}

func sleeping(tag string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte("sleep\x00"+tag)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestContextKills: the context's end kills the group.
func TestContextKills(t *testing.T) {
	g, ws := grant(t)
	for _, pre := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		p, err := proc.Start(ctx, proc.Spec{Argv: []string{"sleep", "617.5"}, Dir: ws, Grant: g, Env: []string{"PATH"}, Prestarted: pre})
		if err != nil {
			t.Fatal(err)
		}
		e := p.Wait()
		cancel()
		if !e.Failed() {
			t.Fatalf("prestarted %v: %v: the program outlived its context", pre, e)
		}
		if pids := sleeping("617.5"); len(pids) > 0 {
			t.Fatalf("prestarted %v: processes survived the context: %v", pre, pids)
		}
	}
}

// TestOutputInOrder: stdout and stderr to one writer arrive through one
// pipe, in the order written, and all of it before Wait returns.
func TestOutputInOrder(t *testing.T) {
	g, ws := grant(t)
	var out bytes.Buffer // written by one copier, read after Wait
	p, err := proc.Start(context.Background(), proc.Spec{Argv: []string{"sh", "-c", "echo 1; echo 2 >&2; echo 3"},
		Dir: ws, Grant: g, Env: []string{"PATH"}, Stdin: strings.NewReader("ignored"), Stdout: &out, Stderr: &out, Prestarted: true})
	if err != nil {
		t.Fatal(err)
	}
	if e := p.Wait(); e.Failed() || e.PipesCut {
		t.Fatalf("exit %+v", e)
	}
	if out.String() != "1\n2\n3\n" {
		t.Fatalf("output %q", out.String())
	}
}

// TestKillGroupNoGroup: a process that leads no group is killed by
// itself, and a killed one (a zombie until reaped) is not an error.
func TestKillGroupNoGroup(t *testing.T) {
	c := exec.Command("sleep", "619.5") // no process group of its own
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := proc.KillGroup(c.Process.Pid); err != nil {
		t.Fatalf("KillGroup of a process leading no group: %v", err)
	}
	if err := proc.KillGroup(c.Process.Pid); err != nil {
		t.Fatalf("KillGroup of a killed process: %v", err)
	}
	if err := c.Wait(); err == nil {
		t.Fatal("the process was not killed")
	}
}
