package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/queue"
)

// steering is the chat's side of the session queue: lines typed while a
// run works.
type steering struct {
	lines <-chan string // the chat's terminal input; nil when piped or ended
	mu    sync.Mutex
	live  string   // the session of the running run
	held  []string // lines typed before the run's session was known
}

func (c *chat) setRunning(id string) {
	c.mu.Lock()
	c.live = id
	c.mu.Unlock()
}

// whileRunning runs fn, queueing the lines typed meanwhile.
func (c *chat) whileRunning(ctx context.Context, fn func(context.Context) (*kernel.RunResult, error)) (*kernel.RunResult, error) {
	type outcome struct {
		res *kernel.RunResult
		err error
	}
	done := make(chan outcome, 1)
	go func() { // owned: the loop below waits for it
		res, err := fn(ctx)
		done <- outcome{res, err}
	}()
	for {
		select {
		case o := <-done:
			c.setRunning("")
			return o.res, o.err
		case line, ok := <-c.lines:
			if !ok {
				c.lines = nil
				continue
			}
			c.queueLine(strings.TrimSpace(line))
		}
	}
}

// queueLine queues a line typed during a run.
func (c *chat) queueLine(line string) {
	if line == "" {
		return
	}
	if strings.HasPrefix(line, "/") {
		name, arg, _ := strings.Cut(line, " ")
		if name == "/queue" || name == "/cancel" {
			if err := c.steerCommand(context.Background(), name, strings.TrimSpace(arg)); err != nil {
				c.r.note("error: %s", oneLine(err))
			}
			return
		}
		c.r.note("(only /queue and /cancel work while the agent works; Ctrl-C cancels the run)")
		return
	}
	c.mu.Lock()
	sid := c.live
	if sid == "" {
		c.held = append(c.held, line)
	}
	c.mu.Unlock()
	if sid == "" {
		c.r.note("  queued: it runs when this run ends")
		return
	}
	e, err := c.app.queue.Add(context.Background(), sid, line, queue.Steer)
	if err != nil {
		c.r.note("error: %s", oneLine(err))
		return
	}
	c.r.note("  queued %s: delivered at the next step (/cancel %s)", e.ID, e.ID)
}

// followUps runs what was queued to run after the run: held lines, then
// the session's follow-up prompts, oldest first.
func (c *chat) followUps(ctx context.Context, sigs chan os.Signal) {
	for ctx.Err() == nil {
		c.mu.Lock()
		var text string
		if len(c.held) > 0 {
			text, c.held = c.held[0], c.held[1:]
		}
		c.mu.Unlock()
		var queued *kernel.Queued
		if text == "" && c.sid != "" {
			e, err := c.app.queue.TakeFollowUp(ctx, c.sid)
			if err != nil {
				c.r.note("error: %s", oneLine(err))
				return
			}
			if e != nil {
				text, queued = e.Text, &e.Queued
			}
		}
		if text == "" {
			return
		}
		c.r.note("› %s", clip(text, 70))
		c.run(ctx, sigs, func(rctx context.Context) (*kernel.RunResult, error) {
			if queued != nil {
				// Stored with its id and only then removed from the
				// queue: a follow-up runs once, even across a crash.
				return c.k.RunQueued(rctx, c.sid, *queued)
			}
			return c.k.Run(rctx, c.sid, text)
		})
	}
}

// steerCommand is /compact, /queue and /cancel.
func (c *chat) steerCommand(ctx context.Context, name, arg string) error {
	sid := c.sid
	c.mu.Lock()
	if c.live != "" {
		sid = c.live
	}
	c.mu.Unlock()
	if sid == "" {
		return errors.New("no session yet")
	}
	switch name {
	case "/compact":
		rec, err := c.k.Compact(ctx, sid)
		if err != nil {
			return err
		}
		if rec == nil {
			fmt.Fprintln(c.env.stderr, "nothing to compact yet")
		}
		return nil
	case "/queue":
		es, err := c.app.queue.List(ctx, sid)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			fmt.Fprintln(c.env.stderr, "nothing queued")
		}
		for _, e := range es {
			fmt.Fprintf(c.env.stderr, "  %s  %-8s %s  %s\n", e.ID, e.Kind, e.Time.Local().Format(time.TimeOnly), clip(e.Text, 60))
		}
		return nil
	default: // /cancel
		if arg == "" {
			return errors.New("/cancel needs a queued message id (see /queue)")
		}
		if err := c.app.queue.Cancel(ctx, sid, arg); err != nil {
			return err
		}
		fmt.Fprintln(c.env.stderr, "cancelled "+arg)
		return nil
	}
}
