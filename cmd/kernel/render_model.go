package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// reasoningDelta shows the model's reasoning on stderr while it streams,
// dim, under a "thinking:" prefix; the answer that follows starts on its
// own line. --quiet hides it; --events carries it as reasoning.delta.
// With collapseReasoning (chat's /thinking off) only "thinking…" shows
// while it streams, and its length once it ends.
func (r *renderer) reasoningDelta(text string) {
	if r.quiet || text == "" {
		return
	}
	if !r.reasoning {
		if r.midLine {
			fmt.Fprintln(r.stdout)
			r.midLine = false
		}
		r.reasoning, r.reasoningLen = true, 0
		if r.collapseReasoning {
			io.WriteString(r.stderr, r.paint("2", "thinking…"))
		} else {
			io.WriteString(r.stderr, r.paint("2", "thinking: "))
		}
	}
	r.reasoningLen += len(text)
	if !r.collapseReasoning {
		io.WriteString(r.stderr, r.paint("2", strings.ReplaceAll(text, "\n", "\n  ")))
	}
}

// endReasoning ends a reasoning line on stderr.
func (r *renderer) endReasoning() {
	if r.reasoning {
		if r.collapseReasoning {
			io.WriteString(r.stderr, r.paint("2", fmt.Sprintf(" (%d bytes hidden; /thinking on shows them)", r.reasoningLen)))
		}
		fmt.Fprintln(r.stderr)
		r.reasoning = false
	}
}

// retryNotice is the one line shown per retry, such as
// "model busy, retrying in 1.0s (429)".
func retryNotice(e kernel.ProviderRetry) string {
	what := "model call failed"
	switch c := e.Cause; {
	case c == "429" || c == "503" || c == "529" || strings.Contains(e.Error, "overloaded"):
		what = "model busy"
	case c == "stream_cut":
		what = "stream cut off"
	case c == "stream_idle":
		what = "stream stalled"
	case c == "connection":
		what = "connection failed"
	case c == "empty_response":
		what = "empty answer"
	case c == "model_missing":
		what = "model unavailable"
	case len(c) == 3 && c[0] == '5':
		what = "server error"
	}
	var s string
	if e.Fallback != "" {
		s = fmt.Sprintf("%s, trying %s instead (%s)", what, e.Fallback, e.Cause)
	} else {
		s = fmt.Sprintf("%s, retrying in %.1fs (%s)", what, e.Delay.Round(100*time.Millisecond).Seconds(), e.Cause)
	}
	if e.Superseded > 0 {
		s += "; the partial answer above is discarded"
	}
	return s
}

// thinking is chat's /thinking: on shows reasoning as it streams, off folds
// it into one line; without an argument it toggles.
func (c *chat) thinking(arg string) error {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	switch arg {
	case "on":
		c.r.collapseReasoning = false
	case "off":
		c.r.collapseReasoning = true
	case "":
		c.r.collapseReasoning = !c.r.collapseReasoning
	default:
		return fmt.Errorf("/thinking takes on or off, not %q", arg)
	}
	state := "shown as it streams"
	if c.r.collapseReasoning {
		state = "folded into one line"
	}
	fmt.Fprintln(c.env.stderr, "reasoning: "+state)
	return nil
}
