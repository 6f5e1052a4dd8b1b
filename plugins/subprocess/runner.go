//go:build unix

package subprocess

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin/runner"

	"github.com/agentkernel/agentkernel/sandbox"
)

// pipeGrace is how long the host waits, after a plugin exits and its
// process group is killed, for its stdout and stderr pipes to reach EOF
// before closing them. Only a process that left the group can hold them.
const pipeGrace = 500 * time.Millisecond

// groupRunner runs a plugin for go-plugin (it is a runner.Runner) in its own
// process group, with a parent-death signal on Linux, an empty stdin and no
// inherited environment but what cmd.Env says. When the plugin exits, for
// whatever reason, the whole group is killed.
//
// Its three goroutines (the waiter and the two pipe copiers) are started by
// Start and end after the process exits; done, outDone and errDone report
// that.
type groupRunner struct {
	name  string
	cmd   *exec.Cmd
	spawn *spawner
	grant sandbox.Grant // the plugin's effective sandbox grant
	scmd  *sandbox.Cmd  // the confined process, once started

	// The plugin's stdout and stderr are copied to pipes go-plugin reads
	// (the handshake; logs under the plugin's name); stderr also to tail.
	stdoutR, stderrR   *os.File
	stdoutPR, stderrPR *io.PipeReader
	stdoutPW, stderrPW *io.PipeWriter
	tail               *tailBuffer

	pid     int
	done    chan struct{} // closed once the process has exited and the group is killed
	outDone chan struct{} // closed once stdout is fully copied
	errDone chan struct{} // closed once stderr is fully copied
	waitErr error         // set before done is closed
	// outcome is the sandbox's report: the limit that stopped the plugin,
	// or why the sandbox could not start it; set before done is closed.
	outcome sandbox.Outcome
}

func newGroupRunner(name string, cmd *exec.Cmd, spawn *spawner, grant sandbox.Grant) *groupRunner {
	r := &groupRunner{
		name: name, cmd: cmd, spawn: spawn, grant: grant,
		tail:    newTailBuffer(16 << 10),
		done:    make(chan struct{}),
		outDone: make(chan struct{}),
		errDone: make(chan struct{}),
	}
	r.stdoutPR, r.stdoutPW = io.Pipe()
	r.stderrPR, r.stderrPW = io.Pipe()
	return r
}

// Start execs the plugin. A "text file busy" error (another goroutine's
// fork briefly holding the copy's write descriptor) is retried.
func (r *groupRunner) Start(ctx context.Context) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return fmt.Errorf("stderr pipe: %w", err)
	}
	// The plugin's private copy runs confined: the sandbox's launcher
	// (this binary, re-executed) starts it in its own namespaces, under
	// its grant, and retries a "text file busy" exec itself.
	argv := append([]string{r.cmd.Path}, r.cmd.Args[1:]...)
	scmd, err := sandbox.Command(context.Background(), r.grant, argv)
	if err == nil {
		scmd.Env, scmd.Dir = r.cmd.Env, r.cmd.Dir
		scmd.Stdin, scmd.Stdout, scmd.Stderr = nil, outW, errW
		scmd.WaitDelay = 0
		err = r.spawn.do(scmd.Start)
	}
	_ = outW.Close()
	_ = errW.Close()
	if err != nil {
		_ = outR.Close()
		_ = errR.Close()
		return fmt.Errorf("exec plugin: %w", err)
	}
	r.scmd, r.cmd = scmd, scmd.Cmd
	r.pid = scmd.Process.Pid
	r.stdoutR, r.stderrR = outR, errR
	go copyPipe(r.stdoutR, r.stdoutPW, nil, r.outDone)
	go copyPipe(r.stderrR, r.stderrPW, r.tail, r.errDone)
	go r.wait()
	return nil
}

// wait waits for the plugin to exit, kills what is left of its process
// group, and closes done. The group is killed before the plugin is reaped
// where the system allows it, so its pid (the group's id) cannot have been
// reused by then.
func (r *groupRunner) wait() {
	waitExited(r.pid)
	killGroup(r.pid)
	err := r.cmd.Wait()
	killGroup(r.pid) // where waitExited could not wait without reaping
	r.outcome = r.scmd.Outcome()
	r.waitErr = err
	close(r.done)
	// Normally both pipes are at EOF already; a process that escaped the
	// group may still hold them, and is cut off.
	grace := time.NewTimer(pipeGrace)
	defer grace.Stop()
	for _, p := range []struct {
		f    *os.File
		done chan struct{}
	}{{r.stdoutR, r.outDone}, {r.stderrR, r.errDone}} {
		select {
		case <-p.done:
		case <-grace.C:
			_ = r.stdoutR.Close()
			_ = r.stderrR.Close()
			<-p.done
		}
	}
	_ = r.stdoutR.Close()
	_ = r.stderrR.Close()
}

// copyPipe copies src to dst (and tail, if set) until src fails, then
// closes dst, so that go-plugin's reader sees EOF, and done.
func copyPipe(src *os.File, dst *io.PipeWriter, tail *tailBuffer, done chan struct{}) {
	defer close(done)
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if tail != nil {
				tail.Write(buf[:n])
			}
			_, _ = dst.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// Wait blocks until the process has exited and its output is drained.
func (r *groupRunner) Wait(context.Context) error {
	<-r.done
	<-r.outDone
	<-r.errDone
	return r.waitErr
}

// Kill kills the plugin's whole process group. It does nothing once the
// plugin has exited (the group was killed then).
func (r *groupRunner) Kill(context.Context) error {
	if r.pid == 0 {
		return nil
	}
	select {
	case <-r.done:
	default:
		killGroup(r.pid)
	}
	return nil
}

// exited reports whether the process has exited.
func (r *groupRunner) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// stderrTail returns the end of what the plugin wrote to stderr, after
// waiting (briefly) for the copy to finish if the process has exited.
func (r *groupRunner) stderrTail() string {
	if r.exited() {
		select {
		case <-r.errDone:
		case <-time.After(2 * pipeGrace):
		}
	}
	return r.tail.String()
}

func (r *groupRunner) Stdout() io.ReadCloser { return r.stdoutPR }
func (r *groupRunner) Stderr() io.ReadCloser { return r.stderrPR }
func (r *groupRunner) Name() string          { return r.name }
func (r *groupRunner) ID() string {
	if r.pid == 0 {
		return ""
	}
	return strconv.Itoa(r.pid)
}

// Diagnose adds nothing: the host builds its own start errors.
func (r *groupRunner) Diagnose(context.Context) string { return "" }

func (r *groupRunner) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (r *groupRunner) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }

// killGroup sends SIGKILL to process group pgid.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// tailBuffer keeps the last max bytes written to it, and the Go runtime's
// last crash report (from its "panic: " or "fatal error: " line, at most
// maxCrashText bytes): a long traceback pushes the report's first line out
// of the tail. Safe for concurrent use.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	crash []byte
	// carry is the end of what was written, so that a report line split
	// across two writes is still found at the start of a line.
	carry []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max, carry: []byte("\n")} }

// crashMarkers start the Go runtime's crash reports, each at a line start.
var crashMarkers = []string{"\npanic: ", "\nfatal error: "}

func (t *tailBuffer) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	data := append(t.carry, p...)
	start := -1
	for _, m := range crashMarkers {
		if i := bytes.LastIndex(data, []byte(m)); i+1 > start && i >= 0 {
			start = i + 1
		}
	}
	switch {
	case start >= 0:
		t.crash = append(t.crash[:0], data[start:]...)
	case t.crash != nil:
		// Up to one byte more than crashText keeps, so it marks the cut.
		t.crash = append(t.crash, p[:min(len(p), max(0, maxCrashText+1-len(t.crash)))]...)
	}
	if len(t.crash) > maxCrashText+1 {
		t.crash = t.crash[:maxCrashText+1]
	}
	const keep = 16 // longer than every marker
	if len(data) > keep {
		data = data[len(data)-keep:]
	}
	t.carry = append(t.carry[:0:0], data...)
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Crash is the last crash report, or "".
func (t *tailBuffer) Crash() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.crash)
}

var _ runner.Runner = (*groupRunner)(nil)
