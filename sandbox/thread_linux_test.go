package sandbox_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/sandbox"
)

// TestLauncherOutlivesStartingThread: a confined program started from a
// goroutine whose OS thread the runtime then retires (the goroutine
// locked it and returned) keeps running to its end. The launcher's
// parent-death signal belongs to the thread that forked it; forked from
// the caller's thread, it was killed mid-run ("sandbox launcher killed"),
// which is how command hooks and run_command failed at random once a
// plugin host had stopped its spawner thread.
func TestLauncherOutlivesStartingThread(t *testing.T) {
	ws := newWorkspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Several, each from a thread of its own: one of them may be the main
	// thread, which the runtime never retires.
	type started struct {
		cmd *sandbox.Cmd
		out *bytes.Buffer
	}
	var cmds []started
	for range 3 {
		cmd, err := command(ctx, workspaceGrant(ws), []string{"/bin/sh", "-c", "sleep 1; echo survived"})
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Dir = ws
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
			errc <- cmd.Start()
		}()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, started{cmd, out})
	}
	for i, c := range cmds {
		if err := c.cmd.Wait(); err != nil || c.out.String() != "survived\n" {
			t.Errorf("program %d died with the thread that started it: %v, outcome %+v, output %q", i, err, c.cmd.Outcome(), c.out.String())
		}
	}
}
