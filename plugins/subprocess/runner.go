//go:build unix

package subprocess

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/hashicorp/go-plugin/runner"

	"github.com/agentkernel/agentkernel/sandbox/proc"
)

// groupRunner runs a plugin for go-plugin (it is a runner.Runner) through
// the process owner (sandbox/proc): confined by its grant, started from
// the host's spawner thread (a parent-death signal on Linux), with an
// empty stdin and no environment but its allowlist and go-plugin's
// handshake. When the plugin exits, for whatever reason, everything it
// started is killed with its sandbox.
//
// The plugin's stdout and stderr are copied to pipes go-plugin reads (the
// handshake; logs under the plugin's name); stderr also to tail. Start
// starts one goroutine, which closes those pipes once the process is gone
// and its output drained; Wait waits for it.
type groupRunner struct {
	name string
	spec proc.Spec
	p    *proc.Process // once started
	pid  int

	stdoutPR, stderrPR *io.PipeReader
	stdoutPW, stderrPW *io.PipeWriter
	tail               *tailBuffer
	closed             chan struct{} // closed once go-plugin's pipes are closed
}

func newGroupRunner(name string, spec proc.Spec) *groupRunner {
	r := &groupRunner{name: name, spec: spec, tail: newTailBuffer(16 << 10), closed: make(chan struct{})}
	r.stdoutPR, r.stdoutPW = io.Pipe()
	r.stderrPR, r.stderrPW = io.Pipe()
	r.spec.Stdout = tee{w: r.stdoutPW}
	r.spec.Stderr = tee{w: r.stderrPW, tail: r.tail}
	return r
}

// Start execs the plugin's verified copy, confined: the sandbox's launcher
// starts it in its own namespaces, under its grant, and retries a "text
// file busy" exec itself.
func (r *groupRunner) Start(context.Context) error {
	p, err := proc.Start(context.Background(), r.spec)
	if err != nil {
		r.closePipes()
		close(r.closed)
		return fmt.Errorf("exec plugin: %w", err)
	}
	r.p, r.pid = p, p.Pid()
	go func() {
		defer close(r.closed)
		p.Wait()
		r.closePipes()
	}()
	return nil
}

// closePipes ends go-plugin's readers (EOF).
func (r *groupRunner) closePipes() {
	_ = r.stdoutPW.Close()
	_ = r.stderrPW.Close()
}

// tee writes to w (and tail) and never fails: the plugin's output is
// drained whether or not go-plugin still reads it.
type tee struct {
	w    io.Writer
	tail *tailBuffer
}

func (t tee) Write(p []byte) (int, error) {
	if t.tail != nil {
		t.tail.Write(p)
	}
	_, _ = t.w.Write(p)
	return len(p), nil
}

// Wait blocks until the process has exited and its output is drained.
func (r *groupRunner) Wait(context.Context) error {
	<-r.closed
	if r.p == nil {
		return nil
	}
	return r.p.Wait().Err
}

// Kill kills the plugin's whole process group. It does nothing once the
// plugin has exited (the group was killed then).
func (r *groupRunner) Kill(context.Context) error {
	if r.p != nil {
		r.p.Kill()
	}
	return nil
}

// done is closed once the process has exited and its group is killed.
func (r *groupRunner) done() <-chan struct{} { return r.p.Done() }

// exited reports whether the process has exited.
func (r *groupRunner) exited() bool { return r.p != nil && r.p.Exited() }

// exit waits for the output to drain (PipeGrace at most after the exit)
// and says how the process ended.
func (r *groupRunner) exit() proc.Exit { return r.p.Wait() }

// stderrTail returns the end of what the plugin wrote to stderr, after
// waiting (briefly) for the copy to finish if the process has exited.
func (r *groupRunner) stderrTail() string {
	if r.exited() {
		r.p.Wait()
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
