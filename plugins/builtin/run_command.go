package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sandbox/proc"
)

const (
	// specGrace is added to the command timeout in the spec, so the
	// kernel's own per-call deadline fires after run_command's.
	specGrace = 10 * time.Second
	// maxArgs bounds argv.
	maxArgs = 1024
)

// RunCommand is the run_command tool: it runs a program (never a shell)
// with the workspace root as working directory, an allowlisted
// environment and a timeout, confined by the sandbox package (see
// CommandGrant), through the process owner (sandbox/proc). It is safe for
// concurrent use.
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

// Call runs the command: parse checks the arguments, run runs the
// program confined until it exits or its timeout passes, and report
// renders how it ended.
func (t *RunCommand) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	a, timeout, err := t.parse(raw)
	if err != nil {
		return kernel.Result{}, err
	}
	name := a.Argv[0]
	if err := ctx.Err(); err != nil {
		return kernel.Result{}, fmt.Errorf("run %s: %w", name, err)
	}
	if _, err := exec.LookPath(name); err != nil && !strings.Contains(name, "/") {
		return kernel.Result{}, fmt.Errorf("run %s: %w (argv[0] must be a program on PATH or a path to an executable)", name, err)
	}
	r, err := t.run(ctx, a.Argv, timeout)
	if err != nil {
		return kernel.Result{}, fmt.Errorf("run %s: %w", name, err)
	}
	if ctx.Err() != nil {
		// The run was cancelled or the kernel's deadline passed: not ours.
		return kernel.Result{}, fmt.Errorf("run %s: %w", name, ctx.Err())
	}
	return r.report(), nil
}

// parse decodes and checks the arguments and returns them with the
// call's timeout (the model's, within the configured one).
func (t *RunCommand) parse(raw json.RawMessage) (runCommandArgs, time.Duration, error) {
	var a runCommandArgs
	if err := decodeArgs(raw, &a); err != nil {
		return a, 0, err
	}
	switch {
	case len(a.Argv) == 0:
		return a, 0, invalidArg("argv", "is required: give the program and its arguments")
	case a.Argv[0] == "":
		return a, 0, invalidArg("argv/0", "the program name is empty")
	case len(a.Argv) > maxArgs:
		return a, 0, invalidArg("argv", "has %d items, more than %d", len(a.Argv), maxArgs)
	case a.TimeoutSeconds < 0:
		return a, 0, invalidArg("timeout_seconds", "must be >= 1")
	}
	for i, s := range a.Argv {
		if strings.ContainsRune(s, 0) {
			return a, 0, invalidArg(fmt.Sprintf("argv/%d", i), "contains a NUL byte")
		}
	}
	timeout := t.ws.commandTimeout
	if a.TimeoutSeconds > 0 {
		timeout = min(time.Duration(a.TimeoutSeconds)*time.Second, timeout)
	}
	return a, timeout, nil
}

// commandRun is how one command ended.
type commandRun struct {
	exit    proc.Exit
	timeout time.Duration // set when the timeout killed it
	elapsed time.Duration
	out     *headTail
}

// run runs argv through a pre-started launcher for the workspace's grant,
// its stdout and stderr combined into the kept head and tail.
func (t *RunCommand) run(ctx context.Context, argv []string, timeout time.Duration) (commandRun, error) {
	return runConfined(ctx, Confined{Dir: t.ws.dir, Grant: t.ws.commandGrant, Env: t.ws.commandEnv, Extra: t.ws.traceEnv(ctx), MaxOutput: t.ws.maxOutput}, argv, timeout)
}

// Confined is how a command tool's program runs: run_command's, and the
// declared command tools' (plugins/declared), which share its runner.
type Confined struct {
	// Dir is the working directory; Grant confines the program (see
	// CommandGrant); Env names the variables it gets and Extra adds
	// NAME=value pairs (proc.Spec).
	Dir   string
	Grant sandbox.Grant
	Env   []string
	Extra []string
	// MaxOutput caps the output kept, head and tail (0: DefaultMaxOutputBytes).
	MaxOutput int
}

// RunConfined runs argv as run_command runs its programs — never through
// a shell, confined by c.Grant through the process owner, killed with
// everything it started at the timeout or when ctx ends — and reports how
// it ended as run_command does (exit status, duration, output). An error
// is one of starting it, or ctx's end.
func RunConfined(ctx context.Context, c Confined, argv []string, timeout time.Duration) (kernel.Result, error) {
	r, err := runConfined(ctx, c, argv, timeout)
	if err != nil {
		return kernel.Result{}, err
	}
	if ctx.Err() != nil {
		return kernel.Result{}, ctx.Err()
	}
	return r.report(), nil
}

// runConfined runs argv through a pre-started launcher for c's grant. At
// the timeout the process owner kills the sandbox's init, and with it
// every process of its PID namespace, setsid or not. Cancelling ctx kills
// it too; ctx's end is the caller's to report.
func runConfined(ctx context.Context, c Confined, argv []string, timeout time.Duration) (commandRun, error) {
	r := commandRun{out: newHeadTail(orDefault(c.MaxOutput, DefaultMaxOutputBytes))}
	start := time.Now()
	p, err := proc.Start(context.WithoutCancel(ctx), proc.Spec{
		Argv: argv, Dir: c.Dir, Grant: c.Grant, Env: c.Env, Extra: c.Extra,
		Stdout: r.out, Stderr: r.out, Prestarted: true,
	})
	if err != nil {
		return r, err
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case <-p.Done():
	case <-tctx.Done():
		p.Kill()
		if ctx.Err() == nil {
			r.timeout = timeout
		}
	}
	r.exit = p.Wait()
	r.elapsed = time.Since(start)
	return r, nil
}

// report renders the run: how it ended, how long it took, its output.
func (r commandRun) report() kernel.Result {
	var b strings.Builder
	isErr := r.exit.Failed()
	if r.timeout > 0 {
		isErr = true
		fmt.Fprintf(&b, "timed out after %s: the command and every process it started were killed\n", r.timeout)
	} else {
		b.WriteString(r.exit.String() + "\n")
	}
	fmt.Fprintf(&b, "duration: %s\n", r.elapsed.Round(time.Millisecond))
	if r.out.total == 0 {
		b.WriteString("output: none\n")
	} else {
		fmt.Fprintf(&b, "output (%d bytes, stdout and stderr combined):\n", r.out.total)
		b.WriteString(r.out.String())
	}
	return kernel.Result{Content: strings.TrimRight(b.String(), "\n"), IsError: isErr}
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
	return validText(w.head) + "\n[... " + strconv.FormatInt(omitted, 10) + " bytes of output omitted: max_output_bytes is " +
		strconv.Itoa(w.headMax+w.tailMax) + " ...]\n" + validText(w.tail)
}

var _ kernel.Tool = (*RunCommand)(nil)
