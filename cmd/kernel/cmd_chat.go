package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

const chatHelp = `Type a prompt and press Enter. Commands:
  /new            start a new session
  /sessions       list the stored sessions
  /resume ID      continue the session ID
  /approve [NOTE] show the pending tool call, and run it if you answer y
  /reject [NOTE]  reject the pending tool call
  /usage          tokens and cost of this session
  /thinking on|off show the model's reasoning as it streams, or fold it into one line
  /compact        summarise the session's older history now
  /queue          list the messages queued for this session
  /cancel ID      cancel a queued message before it is delivered
  /help           this text
  /quit           leave (Ctrl-D too)
Ctrl-C cancels the current run (the answer to your last prompt) and keeps
you in the chat.
Typing while the agent works queues your message: it is delivered after the
current tool round, before the next model call (or runs next if the run ends).`

// cmdChat is an interactive REPL on the same loop as `kernel run`.
func cmdChat(ctx context.Context, args []string, env *cliEnv) error {
	fs := newFlagSet("chat", "", env.stderr)
	var cf commonFlags
	cf.register(fs)
	session := fs.String("session", "", "resume the session `ID`")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	r := newRenderer(env, false, nil)
	r.spin = isTerminal(env.stderr) // a spinner only where a person watches
	defer r.stopSpinner()
	a, k, err := startKernel(ctx, &cf, env, r)
	if err != nil {
		return err
	}
	defer a.Close()
	c := &chat{env: env, app: a, k: k, r: r, sid: *session, interactive: isTerminal(env.stdin)}
	r.onSession = c.setRunning
	if c.sid != "" {
		if err := c.resume(ctx, c.sid); err != nil {
			return err
		}
	}
	return c.loop(ctx)
}

type chat struct {
	env         *cliEnv
	app         *app
	k           *kernel.Kernel
	r           *renderer
	sid         string
	interactive bool
	input       <-chan string // every line read from stdin
	steering
}

func (c *chat) loop(ctx context.Context) error {
	// Ctrl-C cancels the current run only; the chat's own signal handling
	// replaces the CLI's (see command.ownSignals).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	lines := make(chan string)
	c.input = lines
	if c.interactive {
		// A person typing while the agent works steers it; piped input is
		// a script of prompts, run one after another.
		c.lines = lines
	}
	readErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owns stdin; ends at EOF
		defer wg.Done()
		sc := bufio.NewScanner(c.env.stdin)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()
	// The reader goroutine blocks on stdin, which cannot be interrupted; it
	// exits at EOF. Waiting for it here would hang on a terminal, so only
	// wait when input is finite.
	defer func() {
		if !c.interactive {
			wg.Wait()
		}
	}()

	fmt.Fprintln(c.env.stderr, "agentkernel chat · model "+c.app.cfg.Model.Name+" · /help for commands")
	for {
		c.prompt()
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case s := <-sigs:
			if s == syscall.SIGTERM {
				return nil
			}
			fmt.Fprintln(c.env.stderr, "\n(use /quit or Ctrl-D to leave)")
			continue
		case <-ctx.Done():
			return nil
		}
		if !ok {
			fmt.Fprintln(c.env.stderr)
			return <-readErr
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "/") {
			quit, err := c.command(ctx, sigs, line)
			if err != nil {
				fmt.Fprintln(c.env.stderr, "error: "+oneLine(err))
			}
			if quit {
				return nil
			}
			continue
		}
		c.run(ctx, sigs, func(rctx context.Context) (*kernel.RunResult, error) {
			return c.k.Run(rctx, c.sid, line)
		})
		c.followUps(ctx, sigs)
	}
}

func (c *chat) prompt() {
	if c.interactive {
		fmt.Fprint(c.env.stderr, "› ")
	}
}

// run runs one run (a prompt, or an approval that continues one) with its
// own context: Ctrl-C cancels it, and only it.
func (c *chat) run(ctx context.Context, sigs chan os.Signal, fn func(context.Context) (*kernel.RunResult, error)) {
	// On a store replicas share, the run holds the session's lease: fn
	// runs c.k, the leased view, for the run's length.
	plain := c.k
	lk, release, err := c.app.lease(ctx, plain, c.sid)
	if err != nil {
		fmt.Fprintln(c.env.stderr, "error: "+oneLine(err))
		return
	}
	c.k = lk
	defer func() { c.k = plain; release() }()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // owned: ends when the run ends
		select {
		case <-sigs:
			fmt.Fprintln(c.env.stderr, "\ncancelling this run…")
			cancel()
		case <-done:
		}
	}()
	c.r.startSpinner()
	res, err := c.whileRunning(rctx, fn)
	c.r.stopSpinner()
	close(done)
	cancel()
	c.r.endLine()
	if res != nil {
		c.sid = res.SessionID
	}
	switch {
	case res != nil && res.StopReason == kernel.StopCancelled:
		fmt.Fprintln(c.env.stderr, "cancelled; the session keeps everything up to here")
	case err != nil:
		fmt.Fprintln(c.env.stderr, "error: "+oneLine(err))
	case res.StopReason == kernel.StopAwaitingApproval:
		fmt.Fprintln(c.env.stderr, "waiting for your decision: /approve or /reject")
	}
}

func (c *chat) command(ctx context.Context, sigs chan os.Signal, line string) (quit bool, err error) {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/quit", "/exit":
		return true, nil
	case "/help":
		fmt.Fprintln(c.env.stderr, chatHelp)
	case "/new":
		c.sid = ""
		fmt.Fprintln(c.env.stderr, "new session: it starts with your next prompt")
	case "/sessions":
		return false, c.sessions(ctx)
	case "/resume":
		if arg == "" {
			return false, errors.New("/resume needs a session id (see /sessions)")
		}
		return false, c.resume(ctx, arg)
	case "/approve", "/reject":
		if c.sid == "" {
			return false, errors.New("no session yet")
		}
		approve := name == "/approve"
		if approve {
			// As `kernel approve`: the whole call first, then a yes.
			ok, err := c.confirmApproval(ctx)
			if err != nil || !ok {
				return false, err
			}
		}
		c.run(ctx, sigs, func(rctx context.Context) (*kernel.RunResult, error) {
			return c.k.Resolve(rctx, c.sid, approve, arg)
		})
	case "/usage":
		return false, c.usage(ctx)
	case "/thinking":
		return false, c.thinking(arg)
	case "/compact", "/queue", "/cancel":
		return false, c.steerCommand(ctx, name, arg)
	default:
		return false, fmt.Errorf("unknown command %s (/help lists them)", name)
	}
	return false, nil
}

// confirmApproval shows the call waiting for approval in full and asks
// whether to run it; the answer is the next input line.
func (c *chat) confirmApproval(ctx context.Context) (bool, error) {
	s, err := c.app.store.Load(ctx, c.sid)
	if err != nil {
		return false, err
	}
	if s.Pending == nil {
		return false, errors.New("nothing is waiting for approval in this session")
	}
	fmt.Fprintf(c.env.stderr, "waiting for approval:\n%srun this call? [y/N] ", describeApproval(ctx, s.Pending, &s.Meta, c.k.Tools()))
	var answer string
	select {
	case answer = <-c.input:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	fmt.Fprintln(c.env.stderr, "not approved: the call still waits (/approve or /reject)")
	return false, nil
}

func (c *chat) resume(ctx context.Context, id string) error {
	s, err := c.app.store.Load(ctx, id)
	if err != nil {
		return err
	}
	c.sid = id
	fmt.Fprintf(c.env.stderr, "resumed session %s · %q · %d messages", id, s.Meta.Title, len(s.Messages))
	if s.Pending != nil {
		fmt.Fprintf(c.env.stderr, " · waiting for approval of %s (/approve or /reject)", s.Pending.Call.Name)
	}
	fmt.Fprintln(c.env.stderr)
	return nil
}

func (c *chat) usage(ctx context.Context) error {
	if c.sid == "" {
		fmt.Fprintln(c.env.stderr, "no session yet")
		return nil
	}
	s, err := c.app.store.Load(ctx, c.sid)
	if err != nil {
		return err
	}
	m := s.Meta
	fmt.Fprintf(c.env.stderr, "session %s · %s · %s · %d in / %d out tokens · $%.4f\n",
		m.ID, counted(m.Runs, "run"), counted(m.Turns, "turn"), m.Usage.InputTokens, m.Usage.OutputTokens, m.CostUSD)
	return nil
}

func (c *chat) sessions(ctx context.Context) error {
	list, err := c.app.store.List(ctx)
	if err != nil {
		return err
	}
	writeSessionTable(c.env.stderr, list, c.sid)
	return nil
}

// writeSessionTable prints sessions as a table; current is marked.
func writeSessionTable(w io.Writer, list []kernel.SessionMeta, current string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tSTATUS\tTURNS\tCOST\tTITLE")
	for _, m := range list {
		mark := ""
		if m.ID == current {
			mark = " *"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%d\t$%.4f\t%s\n", m.ID, mark, m.Updated.Local().Format(time.DateTime), statusText(m), m.Turns, m.CostUSD, clip(m.Title, 50))
	}
	tw.Flush()
}
