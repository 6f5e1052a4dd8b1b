package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
)

const (
	// pipeGrace is how long run_command waits for the output pipe to close
	// after the process group was killed. Only a process that left the
	// group (setsid) can keep it open that long.
	pipeGrace = 2 * time.Second
	// specGrace is added to the command timeout in the spec, so the
	// kernel's own per-call deadline fires after run_command's.
	specGrace = 10 * time.Second
	// maxArgs bounds argv.
	maxArgs = 1024
)

// RunCommand is the run_command tool: it runs a program (never a shell)
// with the workspace root as working directory, an allowlisted
// environment, its own process group and a timeout, confined by the
// sandbox package (see CommandGrant). It is safe for concurrent use.
type RunCommand struct{ ws *workspace }

type runCommandArgs struct {
	Argv           []string `json:"argv"`
	TimeoutSeconds int      `json:"timeout_seconds"`
}

// Spec describes run_command.
func (t *RunCommand) Spec() kernel.ToolSpec {
	maxSec := int(t.ws.commandTimeout / time.Second)
	return kernel.ToolSpec{
		Name: NameRunCommand,
		Description: "Run a program in the workspace root directory and return its exit code and combined " +
			"stdout/stderr. argv is the program and its arguments as separate strings; it is NOT run by a shell, so " +
			"pipes, redirections, globs, $VARS and ; mean nothing (run [\"sh\", \"-c\", \"...\"] explicitly if a shell is " +
			"really needed). The program gets only a few environment variables and no stdin. When the program exits, " +
			"times out or is cancelled, it and every process it started are killed. Long output keeps its beginning " +
			"and end, with a marker for what was cut. It runs in a sandbox: it may write only inside the workspace " +
			"(not .git), has no network and sees no other process; a limit that stops it is named in the result.",
		Schema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "argv": {
      "type": "array",
      "minItems": 1,
      "maxItems": %d,
      "prefixItems": [{"type": "string", "minLength": 1, "description": "The program: a name looked up on PATH, or a path such as \"./build.sh\"."}],
      "items": {"type": "string"},
      "description": "The program and its arguments, e.g. [\"go\", \"test\", \"./...\"]."
    },
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Kill the command after this many seconds. Default and maximum %d."}
  },
  "required": ["argv"],
  "additionalProperties": false
}`, maxArgs, maxSec, maxSec)),
		Tier:    kernel.TierPrivileged,
		Tags:    []string{"exec"},
		Timeout: t.ws.commandTimeout + specGrace,
		Source:  Source,
	}
}

// Call runs the command.
func (t *RunCommand) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	var a runCommandArgs
	if err := decodeArgs(raw, &a); err != nil {
		return kernel.Result{}, err
	}
	switch {
	case len(a.Argv) == 0:
		return kernel.Result{}, invalidArg("argv", "is required: give the program and its arguments")
	case a.Argv[0] == "":
		return kernel.Result{}, invalidArg("argv/0", "the program name is empty")
	case len(a.Argv) > maxArgs:
		return kernel.Result{}, invalidArg("argv", "has %d items, more than %d", len(a.Argv), maxArgs)
	case a.TimeoutSeconds < 0:
		return kernel.Result{}, invalidArg("timeout_seconds", "must be >= 1")
	}
	for i, s := range a.Argv {
		if strings.ContainsRune(s, 0) {
			return kernel.Result{}, invalidArg(fmt.Sprintf("argv/%d", i), "contains a NUL byte")
		}
	}
	timeout := t.ws.commandTimeout
	if a.TimeoutSeconds > 0 {
		timeout = min(time.Duration(a.TimeoutSeconds)*time.Second, timeout)
	}
	if err := ctx.Err(); err != nil {
		return kernel.Result{}, fmt.Errorf("run %s: %w", a.Argv[0], err)
	}

	if _, err := exec.LookPath(a.Argv[0]); err != nil && !strings.Contains(a.Argv[0], "/") {
		return kernel.Result{}, fmt.Errorf("run %s: %w (argv[0] must be a program on PATH or a path to an executable)", a.Argv[0], err)
	}
	cmd, err := sandbox.CommandPrestarted(context.WithoutCancel(ctx), t.ws.commandGrant, a.Argv)
	if err != nil {
		return kernel.Result{}, fmt.Errorf("run %s: %w", a.Argv[0], err)
	}
	cmd.Dir = t.ws.dir
	cmd.Env = t.env(ctx)
	pr, pw, err := os.Pipe()
	if err != nil {
		return kernel.Result{}, fmt.Errorf("run %s: create output pipe: %w", a.Argv[0], err)
	}
	// An *os.File is handed to the child as is: exec starts no copying
	// goroutine, so Wait only waits for the process.
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return kernel.Result{}, fmt.Errorf("run %s: %w", a.Argv[0], err)
	}

	out := newHeadTail(t.ws.maxOutput)
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		io.Copy(out, pr) // returns when every writer is gone or pr is closed
	}()

	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-tctx.Done():
		// Killing the group kills the sandbox's init, and with it every
		// process of its PID namespace, setsid or not.
		killGroup(cmd.Process.Pid)
		werr = <-waited
	}
	elapsed := time.Since(start)
	outcome := cmd.Outcome()

	// The group is dead; the pipe closes unless a process escaped the group.
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(pipeGrace):
		pr.Close()
		<-done
	}
	pr.Close()

	if ctx.Err() != nil {
		// The run was cancelled or the kernel's deadline passed: not ours.
		return kernel.Result{}, fmt.Errorf("run %s: %w", a.Argv[0], ctx.Err())
	}
	var b strings.Builder
	isErr := false
	var exit interface{ ExitCode() int } // off Linux, where there is no launcher to report
	switch {
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		isErr = true
		fmt.Fprintf(&b, "timed out after %s: the command and every process it started were killed\n", timeout)
	case outcome.Known && outcome.Limit != nil:
		isErr = true
		fmt.Fprintf(&b, "stopped: %s\n", outcome.Limit)
	case outcome.Known && outcome.Err != "":
		isErr = true
		fmt.Fprintf(&b, "not run: sandbox: %s\n", outcome.Err)
	case outcome.Known && !outcome.Exited:
		isErr = true
		fmt.Fprintf(&b, "terminated: signal: %s\n", outcome.Signal)
	case outcome.Known:
		fmt.Fprintf(&b, "exit code: %d\n", outcome.ExitCode)
		isErr = outcome.ExitCode != 0
	case werr == nil:
		b.WriteString("exit code: 0\n")
	case errors.As(werr, &exit) && exit.ExitCode() >= 0:
		fmt.Fprintf(&b, "exit code: %d\n", exit.ExitCode())
		isErr = true
	default:
		isErr = true
		fmt.Fprintf(&b, "terminated: %v\n", werr)
	}
	fmt.Fprintf(&b, "duration: %s\n", elapsed.Round(time.Millisecond))
	if out.total == 0 {
		b.WriteString("output: none\n")
	} else {
		fmt.Fprintf(&b, "output (%d bytes, stdout and stderr combined):\n", out.total)
		b.WriteString(out.String())
	}
	return kernel.Result{Content: strings.TrimRight(b.String(), "\n"), IsError: isErr}, nil
}

// env builds the child's environment from the allowlist. It is never nil:
// a nil Env would make exec pass the whole environment.
func (t *RunCommand) env(ctx context.Context) []string {
	env := make([]string, 0, len(t.ws.commandEnv))
	for _, k := range t.ws.commandEnv {
		if k == TraceParentEnv && t.ws.traceParent {
			if tp := traceParent(ctx); tp != "" {
				env = append(env, k+"="+tp)
			}
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// headTail keeps the first and last bytes written to it, up to max in all.
// It is safe for one writer and a reader after the writer is done.
type headTail struct {
	head, tail []byte
	headMax    int
	tailMax    int
	total      int64
}

func newHeadTail(max int) *headTail {
	h := max / 2
	return &headTail{headMax: h, tailMax: max - h}
}

func (w *headTail) Write(p []byte) (int, error) {
	n := len(p)
	w.total += int64(n)
	if room := w.headMax - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= w.tailMax {
		w.tail = append(w.tail[:0], p[len(p)-w.tailMax:]...)
		return n, nil
	}
	if over := len(w.tail) + len(p) - w.tailMax; over > 0 {
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
	w.tail = append(w.tail, p...)
	return n, nil
}

// String is the kept output, with a marker where bytes were left out.
func (w *headTail) String() string {
	omitted := w.total - int64(len(w.head)) - int64(len(w.tail))
	if omitted == 0 {
		return validText(append(w.head[:len(w.head):len(w.head)], w.tail...))
	}
	return validText(w.head) + "\n[... " + strconv.FormatInt(omitted, 10) + " bytes of output omitted ...]\n" + validText(w.tail)
}

var _ kernel.Tool = (*RunCommand)(nil)
