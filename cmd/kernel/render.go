package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// renderer turns the event stream into what a person reads: the answer on
// stdout as it streams, one short line per step on stderr. It is called
// serially by the kernel.
type renderer struct {
	stdout, stderr io.Writer
	events         io.Writer // every event as JSON, when set
	quiet          bool
	color          bool
	midLine        bool // stdout holds a partial line
	wroteAnswer    bool
	reasoning      bool // stderr holds a partial reasoning line
	// collapseReasoning shows reasoning as one "thinking…" line (chat's
	// /thinking off); reasoningLen counts what it hides.
	collapseReasoning bool
	reasoningLen      int
	// tools, once the kernel is built, preview a call that waits for
	// approval.
	tools *kernel.Registry
	// onSession, when set, learns the session of every run that starts.
	onSession func(id string)
	// scrub redacts credentials in everything written (default: the
	// default scrubber); startKernel sets the configured one.
	scrub func(string) string
	// store is the session store's directory when it is not the default
	// one: the approval hint must name it to work as printed.
	store string
	// held is the text of the message being streamed under --quiet: it is
	// printed only if the message turns out to be the answer (no tool calls).
	held strings.Builder
	// md renders the answer's Markdown block by block when stdout is a
	// terminal (markdown.go); nil writes the text as it streams.
	md *markdownStream

	mu                 sync.Mutex
	spin               bool // show a spinner while the model thinks
	spinMu             sync.Mutex
	spinShow           bool
	spinStop, spinDone chan struct{}
}

func newRenderer(env *cliEnv, quiet bool, events io.Writer) *renderer {
	return &renderer{stdout: env.stdout, stderr: env.stderr, quiet: quiet, events: events,
		color: isTerminal(env.stderr) && os.Getenv("NO_COLOR") == "", md: newMarkdownStream(env.stdout)}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (r *renderer) paint(code, s string) string {
	if !r.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// note prints one status line on stderr, after ending a partial answer
// line so the two never share a line.
func (r *renderer) note(format string, args ...any) {
	if r.quiet {
		return
	}
	r.endLine()
	io.WriteString(r.stderr, r.scrubString(fmt.Sprintf(format+"\n", args...)))
}

func (r *renderer) endLine() {
	r.endReasoning()
	if r.midLine {
		fmt.Fprintln(r.stdout)
		r.midLine = false
	}
}

func (r *renderer) event(e kernel.Event) {
	r.mu.Lock() // the kernel serialises its events, but a policy reload comes from elsewhere
	defer r.mu.Unlock()
	if r.spin {
		r.hideSpinner()
		defer func() {
			// While the model thinks, and while it writes a Markdown block
			// not shown yet.
			if _, ok := e.(kernel.ModelRequest); ok || r.md.pending() {
				r.showSpinner()
			}
		}()
	}
	if r.events != nil {
		if b, err := kernel.MarshalEvent(e); err == nil {
			r.events.Write(append(r.scrubBytes(b), '\n'))
		}
	}
	switch e := e.(type) {
	case kernel.RunStarted:
		if r.onSession != nil {
			r.onSession(e.SessionID)
		}
		what := "session " + e.SessionID
		switch {
		case e.NewSession:
			what += " (new)"
		case e.Resumed:
			what += " (resumed)"
		}
		r.note("%s · model %s", r.paint("1", what), e.Model)
	case kernel.ModelRequest:
		r.note("%s", r.paint("2", e.Progress))
	case kernel.ReasoningDelta:
		r.reasoningDelta(e.Text)
	case kernel.MessageDelta:
		r.endReasoning()
		if r.quiet {
			r.held.WriteString(e.Text)
			return
		}
		r.answer(e.Text, false)
	case kernel.MessageCompleted:
		r.endReasoning()
		if r.quiet {
			text := r.held.String()
			r.held.Reset()
			if len(e.Message.ToolCalls) > 0 || text == "" {
				return // intermediate text before tool calls: not the answer
			}
			r.answer(text, true)
		} else if r.md != nil {
			r.answer("", true)
		}
		r.endLine()
	case kernel.ToolStarted:
		r.note("  %s %s %s", r.paint("36", "→"), e.Tool, clip(e.Args, 100))
	case kernel.ToolProgress:
		r.note("    %s %s", r.paint("2", "…"), clip(e.Text, 100))
	case kernel.ToolCompleted:
		switch {
		case e.IsError && e.Error == "":
			// The tool ran and answered with an error result: its text is
			// the model's to read (`kernel sessions show`), not the kernel's.
			r.note("  %s %s · %s · %s · the tool reported an error", r.paint("31", "✗"), e.Tool, fmtDuration(e.Duration), fmtBytes(e.Bytes))
		case e.IsError:
			r.note("  %s %s: %s", r.paint("31", "✗"), e.Tool, clip(firstLine(e.Error), 140))
		default:
			r.note("  %s %s · %s · %s", r.paint("32", "✓"), e.Tool, fmtDuration(e.Duration), fmtBytes(e.Bytes))
		}
	case kernel.PolicyDecided:
		d := e.Decision
		if d.Effect != kernel.EffectAllow || len(d.WouldDeny)+len(d.WouldAsk) > 0 {
			r.note("  %s %s %s%s", r.paint("33", "policy:"), d.Effect, e.Tool, rulesSuffix(d))
		}
	case kernel.ApprovalRequired:
		a := e.Approval
		r.note("%s %s — %s\n%s\n  approve: %s    reject: %s",
			r.paint("33;1", "approval required:"), a.Call.Name, a.Message, indent(describeApproval(context.Background(), &a, nil, r.tools)),
			resumeHint("approve", a.SessionID, r.store), resumeHint("reject", a.SessionID, r.store))
	case kernel.ApprovalResolved:
		verb := "rejected"
		if e.Approved {
			verb = "approved"
		}
		r.note("  %s %s %s", r.paint("33", "approval"), verb, e.Tool)
	case kernel.BudgetWarning:
		r.note("  %s %s %s", r.paint("33", "budget warning:"), e.ID, e.Message)
	case kernel.BudgetExceeded:
		r.note("  %s %s %s", r.paint("31", "budget exceeded:"), e.ID, e.Message)
	case kernel.HookBlocked:
		switch kernel.HookPoint(e.Phase) {
		case kernel.PointRunEnd:
			r.note("  %s %s does not let the run end: %s", r.paint("33", "hook"), e.Hook, e.Reason)
		case kernel.PointBeforeTool, kernel.PointAfterTool:
			r.note("  %s %s blocked %s: %s", r.paint("33", "hook"), e.Hook, e.Tool, e.Reason)
		default:
			r.note("  %s %s blocked the run (%s): %s", r.paint("33", "hook"), e.Hook, e.Phase, e.Reason)
		}
	case kernel.HookRewrote:
		r.note("  %s %s rewrote %s (%s)", r.paint("2", "hook"), e.Hook, hookTarget(e.Tool, e.Phase), e.What)
	case kernel.HookFailed:
		r.note("  %s %s failed on %s: %s", r.paint("31", "hook"), e.Hook, hookTarget(e.Tool, e.Phase), e.Error)
	case kernel.ContextCompacted:
		switch e.Kind {
		case "summarised":
			r.note("  %s summarised %d old messages (%d → %d tokens, $%.4f)", r.paint("2", "context:"), e.Dropped, e.TokensBefore, e.TokensAfter, e.CostUSD)
		case "trimmed":
			r.note("  %s trimmed %d large tool results (%d → %d tokens)", r.paint("2", "context:"), e.Trimmed, e.TokensBefore, e.TokensAfter)
		default:
			r.note("  %s left %d old messages out to fit the context window", r.paint("2", "context:"), e.Dropped)
		}
	case kernel.ContextWarning:
		r.note("  %s the next request takes %d of %d tokens (%.0f%%)", r.paint("33", "context:"), e.Used, e.Window, 100*e.Fraction)
	case kernel.SteerDelivered:
		r.note("  %s delivered: %s", r.paint("36", "steer"), clip(e.Text, 70))
	case kernel.ProviderRetry:
		r.endReasoning()
		if r.md != nil && e.Superseded > 0 {
			r.md.reset()
		}
		r.note("%s", r.paint("33", retryNotice(e)))
	case kernel.ConfigReloaded:
		if e.Error != "" {
			r.note("  %s %s reload failed, keeping the previous one: %s", r.paint("31", "config:"), e.What, e.Error)
		} else {
			r.note("  %s %s reloaded (revision %s)", r.paint("2", "config:"), e.What, e.Revision)
		}
	case kernel.Notice:
		r.note("  %s %s", r.paint("33", e.Source+":"), e.Text)
	case kernel.AgentEvent:
		r.childEvent(e)
	case kernel.RunCompleted:
		r.endLine()
		if r.quiet {
			return
		}
		if b := e.Blocked; b != nil {
			fmt.Fprintf(r.stderr, "%s · stopped by hook %s (%s): %s\n", r.paint("33;1", string(e.StopReason)), b.Hook, b.Point, b.Reason)
		}
		for _, n := range e.Notes {
			fmt.Fprintf(r.stderr, "  %s %s: %s\n", r.paint("2", "note"), n.Hook, n.Text)
		}
		fmt.Fprintf(r.stderr, "%s · %s · %d in / %d out tokens · $%.4f · %s\n",
			r.paint("1", string(e.StopReason)), counted(e.Turns, "turn"), e.Usage.InputTokens, e.Usage.OutputTokens, e.CostUSD, fmtDuration(e.Duration))
	case kernel.RunFailed:
		r.endLine()
		switch {
		case r.quiet:
		case e.StopReason == kernel.StopEmptyResponse:
			fmt.Fprintf(r.stderr, "%s · the model answered with nothing, twice\n", r.paint("31;1", string(e.StopReason)))
		case e.StopReason == kernel.StopToolProtocol:
			fmt.Fprintf(r.stderr, "%s · the model kept breaking the text tool protocol (see docs/providers.md)\n", r.paint("31;1", string(e.StopReason)))
		case e.StopReason == kernel.StopGuardrail:
			fmt.Fprintf(r.stderr, "%s · %s\n", r.paint("31;1", string(e.StopReason)), e.Error)
		}
	}
}

// childEvent shows a child agent's run under the call that started it, on
// stderr only (a child's answer is its caller's tool result, never the
// run's answer): its start, tool calls, answer and end, indented by depth.
func (r *renderer) childEvent(e kernel.AgentEvent) {
	agent, in := e.Agent, kernel.Event(e)
	for {
		ae, ok := in.(kernel.AgentEvent)
		if !ok {
			break
		}
		agent, in = ae.Agent, ae.Event
	}
	_, depth := e.Innermost()
	pad := strings.Repeat("  ", depth+1)
	switch c := in.(type) {
	case kernel.RunStarted:
		r.note("%s%s agent %s · session %s", pad, r.paint("36", "↳"), agent, c.SessionID)
	case kernel.ToolStarted:
		r.note("%s  %s %s %s", pad, r.paint("36", "→"), c.Tool, clip(c.Args, 80))
	case kernel.ToolCompleted:
		if c.IsError {
			r.note("%s  %s %s: %s", pad, r.paint("31", "✗"), c.Tool, clip(firstLine(orDefault(c.Error, "the tool reported an error")), 120))
		} else {
			r.note("%s  %s %s · %s", pad, r.paint("32", "✓"), c.Tool, fmtDuration(c.Duration))
		}
	case kernel.MessageCompleted:
		if len(c.Message.ToolCalls) == 0 && c.Message.Content != "" {
			r.note("%s  %s %s", pad, r.paint("2", "says:"), clip(firstLine(c.Message.Content), 100))
		}
	case kernel.RunCompleted:
		r.note("%s%s agent %s %s · %s · $%.4f", pad, r.paint("36", "↲"), agent, c.StopReason, counted(c.Turns, "turn"), c.CostUSD)
	}
}

// answer writes streamed answer text to stdout: as it comes, or, on a
// terminal, as rendered Markdown blocks once they are complete (all that
// is left when last, the message's end).
func (r *renderer) answer(text string, last bool) {
	if r.md != nil {
		out := r.md.write(text)
		if last {
			out += r.md.flush()
		}
		if out != "" {
			io.WriteString(r.stdout, out)
			r.wroteAnswer = true
		}
		return
	}
	if text == "" {
		return
	}
	io.WriteString(r.stdout, text)
	r.midLine = !strings.HasSuffix(text, "\n")
	r.wroteAnswer = true
}

func rulesSuffix(d kernel.Decision) string {
	var parts []string
	if len(d.Rules) > 0 {
		parts = append(parts, "rule "+strings.Join(d.Rules, ", "))
	}
	if len(d.WouldDeny) > 0 {
		parts = append(parts, "dry-run would deny: "+strings.Join(d.WouldDeny, ", "))
	}
	if len(d.WouldAsk) > 0 {
		parts = append(parts, "dry-run would ask: "+strings.Join(d.WouldAsk, ", "))
	}
	s := ""
	if d.Message != "" {
		s = ": " + d.Message
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	return s
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return d.Round(10 * time.Millisecond).String()
}

func fmtBytes(n int) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

// startSpinner shows a spinner on stderr until the model's first output or
// the next event; only when spin is set (stderr is a terminal).
func (r *renderer) startSpinner() {
	if !r.spin || r.spinStop != nil {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	r.spinStop, r.spinDone = stop, done
	go func() { // owned by the renderer: stopSpinner waits for it
		defer close(done)
		frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			r.spinMu.Lock()
			if r.spinShow {
				fmt.Fprintf(r.stderr, "\r%s thinking", frames[i%len(frames)])
			}
			r.spinMu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
}

// stopSpinner stops the spinner goroutine and waits for it.
func (r *renderer) stopSpinner() {
	if r.spinStop == nil {
		return
	}
	close(r.spinStop)
	<-r.spinDone
	r.spinStop, r.spinDone = nil, nil
	r.hideSpinner()
}

// showSpinner and hideSpinner switch the spinner's line on and off around
// model calls.
func (r *renderer) showSpinner() {
	r.spinMu.Lock()
	r.spinShow = r.spinStop != nil
	r.spinMu.Unlock()
}

func (r *renderer) hideSpinner() {
	r.spinMu.Lock()
	if r.spinShow {
		fmt.Fprint(r.stderr, "\r\x1b[K")
		r.spinShow = false
	}
	r.spinMu.Unlock()
}

// hookTarget is what a hook event is about: the tool of a call, or the
// lifecycle point.
func hookTarget(tool, phase string) string {
	if tool != "" {
		return tool
	}
	return "the " + strings.ReplaceAll(phase, "_", " ")
}
