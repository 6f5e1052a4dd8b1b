package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentkernel/agentkernel/sandbox"
)

// PipeGrace is how long a process's output pipes may stay open once the
// process and its sandbox are gone before they are closed: only a process
// that left the sandbox's group could hold them that long.
const PipeGrace = time.Second

// Spec is what to run and how. The zero values of the optional fields
// mean: no extra variables, stdin empty, output discarded, a cold start
// forked from the sandbox package's own thread (sandbox.Cmd.Thread).
type Spec struct {
	// Argv is the program and its arguments; Argv[0] is looked up in the
	// PATH of the process's environment when it has no slash.
	Argv []string
	// Dir is the working directory (it must be inside the grant).
	Dir string
	// Grant confines the process (package sandbox).
	Grant sandbox.Grant
	// Env names the variables the process gets, with the kernel's values
	// (unset ones are left out): its whole environment, with Extra.
	Env []string
	// Extra are NAME=value pairs the kernel itself sets (go-plugin's
	// handshake), added after Env's.
	Extra []string
	// Stdin is the process's standard input.
	Stdin io.Reader
	// Stdout and Stderr receive the output. An *os.File is handed to the
	// process as it is; any other writer is fed from a pipe the Process
	// owns and drains. The same writer for both gets one pipe.
	Stdout, Stderr io.Writer
	// Prestarted hands the program to a launcher confined ahead of time
	// for the same grant (sandbox.CommandPrestarted): for short programs
	// run often (run_command, command hooks).
	Prestarted bool
	// Spawner, when set, starts a cold start's launcher on its thread, so
	// that the launcher's parent-death signal means "the kernel is gone"
	// (subprocess plugins).
	Spawner *Spawner
}

// Env returns NAME=value for each of names set in the kernel's
// environment, in order. It is never nil: a nil Env would make exec pass
// the whole environment on.
func Env(names []string) []string {
	env := make([]string, 0, len(names))
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// Command builds s's confined command for a caller whose library starts
// and waits for the *exec.Cmd itself (the MCP SDK's transport): the
// allowlisted environment, the working directory and stdio are set, the
// context's end kills the whole group, and Wait waits PipeGrace at most
// for the output. Spec.Prestarted and Spec.Spawner do not apply.
func Command(ctx context.Context, s Spec) (*sandbox.Cmd, error) {
	cmd, err := sandbox.Command(ctx, s.Grant, s.Argv)
	if err != nil {
		return nil, err
	}
	setup(cmd, s)
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	return cmd, nil
}

func setup(cmd *sandbox.Cmd, s Spec) {
	cmd.Env = append(Env(s.Env), s.Extra...)
	cmd.Dir = s.Dir
	cmd.Stdin = s.Stdin
	cmd.WaitDelay = PipeGrace
	c := cmd.Cmd
	cmd.Cancel = func() error { return Kill(c) }
}

// Kill kills the process group of a started command (nothing before
// Start).
func Kill(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return KillGroup(cmd.Process.Pid)
}

// Process is a started confined program. Its methods are safe for
// concurrent use.
type Process struct {
	cmd        *sandbox.Cmd
	pid        int
	prestarted bool

	copies   sync.WaitGroup
	readEnds []*os.File

	killed  atomic.Bool
	done    chan struct{} // closed when the process is gone and reaped
	drained chan struct{} // closed when the output is drained too
	exit    Exit          // set before done is closed
}

// Start starts s. ctx's end kills the process (and everything it started).
func Start(ctx context.Context, s Spec) (*Process, error) {
	var cmd *sandbox.Cmd
	var err error
	if s.Prestarted {
		cmd, err = sandbox.CommandPrestarted(ctx, s.Grant, s.Argv)
	} else {
		cmd, err = sandbox.Command(ctx, s.Grant, s.Argv)
	}
	if err != nil {
		return nil, err
	}
	setup(cmd, s)
	p := &Process{cmd: cmd, prestarted: s.Prestarted, done: make(chan struct{}), drained: make(chan struct{})}
	childEnds, err := p.output(s.Stdout, s.Stderr)
	if err != nil {
		return nil, err
	}
	if s.Spawner != nil && !s.Prestarted {
		cmd.Thread = s.Spawner.Do
	}
	err = cmd.Start()
	for _, f := range childEnds {
		f.Close()
	}
	if err != nil {
		for _, f := range p.readEnds {
			f.Close()
		}
		p.copies.Wait()
		return nil, err
	}
	p.pid = cmd.Process.Pid
	go p.reap()
	return p, nil
}

// output sets the command's stdout and stderr: a writer that is not a
// file gets a pipe and a goroutine copying from it. It returns the
// process's ends, to close once it started.
func (p *Process) output(stdout, stderr io.Writer) ([]*os.File, error) {
	var child []*os.File
	pipe := func(w io.Writer) (io.Writer, error) {
		if w == nil {
			return nil, nil
		}
		if f, ok := w.(*os.File); ok {
			return f, nil
		}
		r, cw, err := os.Pipe()
		if err != nil {
			for _, f := range append(child, p.readEnds...) {
				f.Close()
			}
			return nil, fmt.Errorf("output pipe: %w", err)
		}
		child = append(child, cw)
		p.readEnds = append(p.readEnds, r)
		p.copies.Add(1)
		go func() {
			defer p.copies.Done()
			_, _ = io.Copy(w, r)
		}()
		return cw, nil
	}
	out, err := pipe(stdout)
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout = out
	if sameWriter(stdout, stderr) {
		p.cmd.Stderr = out
		return child, nil
	}
	if p.cmd.Stderr, err = pipe(stderr); err != nil {
		return nil, err
	}
	return child, nil
}

// sameWriter reports whether a and b are the same writer (and not nil).
func sameWriter(a, b io.Writer) bool {
	if a == nil || b == nil || reflect.TypeOf(a) != reflect.TypeOf(b) || !reflect.TypeOf(a).Comparable() {
		return false
	}
	return a == b
}

// reap waits for the process, kills what is left of its group, records
// how it ended, then drains the output.
func (p *Process) reap() {
	var err error
	if p.prestarted {
		// Wait returns once the launcher killed and reaped every process
		// of the sandbox; the launcher itself is reaped by package sandbox.
		err = p.cmd.Wait()
	} else {
		reserved := waitExited(p.pid)
		_ = KillGroup(p.pid)
		err = p.cmd.Wait()
		if !reserved {
			_ = KillGroup(p.pid)
		}
	}
	p.exit = Exit{Outcome: p.cmd.Outcome(), Err: err, Killed: p.killed.Load()}
	close(p.done)
	copied := make(chan struct{})
	go func() { p.copies.Wait(); close(copied) }()
	t := time.NewTimer(PipeGrace)
	select {
	case <-copied:
	case <-t.C:
		p.exit.PipesCut = true
		for _, f := range p.readEnds {
			f.Close()
		}
		<-copied
	}
	t.Stop()
	for _, f := range p.readEnds {
		f.Close()
	}
	close(p.drained)
}

// Pid is the process id of the sandbox's launcher, which leads the
// process group.
func (p *Process) Pid() int { return p.pid }

// Done is closed when the process and everything it started are gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether Done is closed.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill kills the process's whole group. It does nothing once the process
// is gone.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	p.killed.Store(true)
	_ = KillGroup(p.pid)
}

// Wait waits for the process to be gone and its output drained (at most
// PipeGrace longer), and says how it ended.
func (p *Process) Wait() Exit {
	<-p.drained
	return p.exit
}

// Exit is how a process ended.
type Exit struct {
	// Outcome is the sandbox launcher's report (Known false: there was
	// none, as when it was killed from outside).
	Outcome sandbox.Outcome
	// Err is the sandbox command's Wait error: a *sandbox.LimitError, an
	// exit error with ExitCode, or why it could not run.
	Err error
	// Killed is set when its owner killed it (Kill).
	Killed bool
	// PipesCut is set when its output pipes were still open PipeGrace
	// after it was gone, and were closed.
	PipesCut bool
}

// Code is the exit code, or -1 when the process did not exit by itself
// (a signal, a limit, a kill, a failed start).
func (e Exit) Code() int {
	if e.Outcome.Known {
		if e.Outcome.Exited && e.Outcome.Err == "" {
			return e.Outcome.ExitCode
		}
		return -1
	}
	var ec interface{ ExitCode() int }
	switch {
	case e.Err == nil:
		return 0
	case errors.As(e.Err, &ec):
		return ec.ExitCode()
	}
	return -1
}

// Failed reports whether the process did not exit 0.
func (e Exit) Failed() bool { return e.Code() != 0 || e.Outcome.Limit != nil }

// String explains the end on one line, the form run_command reports:
// "exit code: 3", "stopped: sandbox limit memory_mb reached: ...",
// "terminated: signal: killed", "not run: sandbox: ...".
func (e Exit) String() string {
	o := e.Outcome
	switch {
	case o.Known && o.Limit != nil:
		return "stopped: " + o.Limit.Error()
	case o.Known && o.Err != "":
		return "not run: sandbox: " + o.Err
	case o.Known && !o.Exited:
		return "terminated: signal: " + o.Signal
	case o.Known:
		return fmt.Sprintf("exit code: %d", o.ExitCode)
	case e.Err == nil:
		return "exit code: 0"
	case e.Code() >= 0:
		return fmt.Sprintf("exit code: %d", e.Code())
	}
	return fmt.Sprintf("terminated: %v", e.Err)
}
